"""Constants shared by more than one part of dpcheck, each defined once."""

from __future__ import annotations

# Exit codes, as in ruff: clean, findings at or above the fail level, usage/config/internal error.
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

# The engine's own codes (every other code belongs to a rule module).
SYNTAX_ERROR = "DP001"
INTERNAL_ERROR = "DP002"
CONFIRM_NOT_RUN = "DP003"  # --confirm could not run or compare a file's model

OUTPUT_FORMATS = ("full", "concise", "json", "json-lines", "sarif", "github")
BACKENDS = ("auto", "cuda", "emulated")
# --fail-level: the least severe finding that gives exit 1 (Severity values, most severe first).
FAIL_LEVELS = ("error", "warning", "info")

# The --confirm child prints its result on one stdout line starting with this marker.
CHILD_RESULT_MARKER = "DPCHECK-RESULT "

# Every dotted name under which torch exposes the DataParallel class.
DATAPARALLEL_CLASSES = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                                  "torch.nn.parallel.data_parallel.DataParallel"})
# DistributedDataParallel, under every dotted name torch exposes it.
DISTRIBUTED_DATAPARALLEL_CLASSES = frozenset({"torch.nn.parallel.DistributedDataParallel",
                                              "torch.nn.parallel.distributed.DistributedDataParallel"})
# The class name other libraries give their DistributedDataParallel (apex's `apex.parallel`, fairscale's):
# a wrapper around the same module, never the model itself.
DISTRIBUTED_DATAPARALLEL_NAME = "DistributedDataParallel"
# The functional form: `nn.parallel.data_parallel(module, inputs, ...)`.
DATAPARALLEL_FUNCTIONS = frozenset({"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"})
# `replicate(module, devices)`: the copies a hand-written data-parallel step (replicate, scatter,
# parallel_apply, gather) runs its chunks on; the code that calls it runs once, on the calling device.
REPLICATE_FUNCTIONS = frozenset({"torch.nn.parallel.replicate", "torch.nn.parallel.replicate.replicate"})
# The method `DataParallelWithCallback` / `patch_replication_callback` (Synchronized-BatchNorm-PyTorch)
# call on every module of each replica after `replicate`: a class defining it coordinates its replicas.
REPLICATION_CALLBACK = "__data_parallel_replicate__"
# Library trainers that may wrap the model they are handed in DataParallel themselves: transformers'
# `Trainer` (and its subclasses, `Seq2SeqTrainer`: more than one GPU and no distributed launch), and
# Lightning's (`strategy="dp"`). A project that imports one may use DataParallel no scanned file shows:
# the packages whose imported names ending in `Trainer` count, and the packages any import of counts.
TRAINER_NAME_PACKAGES = frozenset({"transformers"})
TRAINER_PACKAGES = frozenset({"pytorch_lightning", "lightning"})
# Modules whose `import *` brings DataParallel into a file.
DATAPARALLEL_STAR_MODULES = frozenset({"torch.nn", "torch.nn.parallel"})

# Jupyter notebooks are checked cell by cell (dpcheck.analysis.notebook, imported only when one is met).
NOTEBOOK_SUFFIX = ".ipynb"
