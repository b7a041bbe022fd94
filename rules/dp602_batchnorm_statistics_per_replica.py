"""
## What it does
Reports BatchNorm layers (`nn.BatchNorm1d/2d/3d`) in a model, once per class, as
information; and `nn.SyncBatchNorm` (or `convert_sync_batchnorm`) in a file that also
wraps a model in `nn.DataParallel`, as an error.

## Why is this bad?
Under DataParallel each replica normalises with its own B/N slice of the batch, and
only replica 0's running statistics are kept (its buffers are the original's storage),
so the statistics come from 1/N of the data. Small per-GPU batches make this worse.
`nn.SyncBatchNorm` does not help: without a process group it silently acts as plain
BatchNorm under DataParallel, with no warning.

## How to fix
Use a larger per-GPU batch or GroupNorm/LayerNorm, or move to DistributedDataParallel
with SyncBatchNorm.
"""

from __future__ import annotations

import ast

from dpcheck.findings import Severity
from dpcheck.rule import Rule

_BATCHNORM = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d")


class BatchNormStatisticsPerReplica(Rule):
    code = "DP602"
    name = "batchnorm-statistics-per-replica"
    severity = Severity.INFO
    summary = "BatchNorm under DataParallel uses per-replica statistics; SyncBatchNorm is silently inert"
    fix_hint = "Use larger per-GPU batches or GroupNorm, or DistributedDataParallel with SyncBatchNorm"
    bad_example = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                self.bn = nn.SyncBatchNorm(8)

            def forward(self, x):
                return self.bn(self.conv(x))

        model = nn.DataParallel(Net().cuda())
    """
    good_example = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                self.norm = nn.GroupNorm(4, 8)

            def forward(self, x):
                return self.norm(self.conv(x))
    """

    def check_class(self, model):
        sync_under_dp = _wraps_in_dataparallel(model.ctx)
        for name, facts in model.attrs.items():
            for _, value, _ in facts.assignments:
                if not isinstance(value, ast.Call):
                    continue
                resolved = model.ctx.resolve(value.func) or ""
                last = resolved.rsplit(".", 1)[-1]
                if resolved.startswith("torch.nn.") and last == "SyncBatchNorm" and sync_under_dp:
                    yield self.violation(value, f"`self.{name}` is nn.SyncBatchNorm in a model wrapped in "
                                         "nn.DataParallel: with no process group it silently acts as "
                                         "plain per-replica BatchNorm", severity=Severity.ERROR)
                    return
                if resolved.startswith("torch.nn.") and last in _BATCHNORM:
                    yield self.violation(value, f"`self.{name}` is {last}: under DataParallel it normalises "
                                         "each replica's B/N slice and keeps replica 0's running statistics")
                    return

    def check_file(self, ctx):
        if not _wraps_in_dataparallel(ctx):
            return
        for node in ctx.nodes(ast.Call):
            if (ctx.resolve(node.func) or "").endswith("convert_sync_batchnorm"):
                yield self.violation(node, "`convert_sync_batchnorm` on a model wrapped in nn.DataParallel: "
                                     "SyncBatchNorm needs DistributedDataParallel; here it silently acts as "
                                     "plain BatchNorm", severity=Severity.ERROR)


def _wraps_in_dataparallel(ctx) -> bool:
    return bool(ctx.dataparallel_calls)
