"""
## What it does
Reports every `nn.DataParallel(...)` construction, as information. Off by default:
enable it with `--extend-select DP708`.

## Why is this bad?
The PyTorch documentation recommends `DistributedDataParallel` even on a single
machine: one process per GPU, no per-step replication of the model, no GIL contention
between replica threads, no gather onto GPU 0 (whose memory fills first), and none of
the replica hazards the other DP rules find. DataParallel is kept for compatibility.

## How to fix
Move to `torch.nn.parallel.DistributedDataParallel`, launched with `torchrun`; see
https://pytorch.org/tutorials/intermediate/ddp_tutorial.html.
"""

from __future__ import annotations

from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule


class PreferDistributedDataParallel(Rule):
    code = "DP708"
    name = "prefer-distributed-data-parallel"
    severity = Severity.INFO
    not_confirmable = TRAINING_SCRIPT
    default_enabled = False
    summary = "PyTorch recommends DistributedDataParallel over nn.DataParallel"
    fix_hint = "Use DistributedDataParallel (one process per GPU, launched with torchrun)"
    bad_example = """
        model = nn.DataParallel(Net().cuda())
    """
    good_example = """
        model = nn.parallel.DistributedDataParallel(Net().cuda(), device_ids=[local_rank])
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in facts.dp_calls:
            requires = tuple(frozenset({c}) for c in sorted(facts.source_of(call).requires))
            yield self.violation(call, "nn.DataParallel: PyTorch recommends DistributedDataParallel, which "
                                 "avoids per-step replication, GIL contention and GPU-0 imbalance", requires=requires)
