"""The DataParallel harness, usable from your own tests.

    from dpcheck.harness import check, assert_dataparallel_safe

    report = check(model, (x,))            # emulated GPUs unless 2+ real ones exist
    assert_dataparallel_safe(model, (x,))  # fails with the observations

`check` never modifies ``model``: each run uses a deep copy. It compares a run on one
device with replicate / scatter / parallel_apply / gather on N devices, at the batch
size of the example inputs (scatter splits their dim 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpcheck.harness.runner import Observation, RunReport

__all__ = ["check", "assert_dataparallel_safe", "Observation", "RunReport"]


def __getattr__(name: str):
    # torch is imported on first use, not with the package: dpcheck's own process reaches
    # dpcheck.harness.child and dpcheck.harness.processes without needing torch.
    if name in ("Observation", "RunReport"):
        from dpcheck.harness import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check(model, args: tuple = (), kwargs: dict | None = None, devices: int | None = None,
          backend: str = "auto") -> RunReport:
    """Run ``model(*args, **kwargs)`` on one device and under DataParallel; return what differed."""
    from dpcheck.harness.runner import make_backend, run_model

    chosen = make_backend(backend, devices)
    args = args if isinstance(args, tuple) else (args,)
    batch = _batch_size(args, kwargs or {})

    def build(_batch_size: int):
        # Copies made outside the emulation's TorchFunctionMode (Backend.copy), where copying every
        # tensor costs nothing extra; ``model`` itself is never run.
        return chosen.copy(model), chosen.copy(args), chosen.copy(kwargs or {})

    return run_model(build, chosen, [batch])


def assert_dataparallel_safe(model, args: tuple = (), kwargs: dict | None = None, devices: int | None = None,
                             backend: str = "auto") -> RunReport:
    """Like :func:`check`, but raise AssertionError listing the observations, if any."""
    report = check(model, args, kwargs, devices, backend)
    problems = [o.evidence for o in report.observations] + [o.evidence for o in report.reference_failures]
    problems += report.errors
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise AssertionError(f"{type(model).__name__} is not DataParallel-safe "
                             f"({report.backend}, {report.devices} devices):\n{lines}")
    return report


def _batch_size(args: tuple, kwargs: dict) -> int:
    import torch
    from torch.utils._pytree import tree_flatten

    for leaf in tree_flatten((args, kwargs))[0]:
        if isinstance(leaf, torch.Tensor) and leaf.dim() > 0:
            return leaf.shape[0]
    return 1
