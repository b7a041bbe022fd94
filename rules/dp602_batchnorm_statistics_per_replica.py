"""
## What it does
Reports BatchNorm layers (`nn.BatchNorm1d/2d/3d`) in a model, once per class, as
information: as attributes, inside `nn.Sequential`/`nn.ModuleList` or layer lists built in
`__init__`, blocks that default to BatchNorm (`torchvision.ops.Conv2dNormActivation`, timm's
`ConvNormAct`) and torchvision backbones built with it (`resnet50()`, `densenet121()`); and `nn.SyncBatchNorm` (or `convert_sync_batchnorm`) in a file that also
wraps a model in `nn.DataParallel`, as an error; and, as a warning, a script that imports the
Synchronized-BatchNorm package (`sync_batchnorm`, vendored from vacancy/Synchronized-BatchNorm-PyTorch)
but wraps in plain `nn.DataParallel` without `patch_replication_callback` or `DataParallelWithCallback`.

## Why is this bad?
Under DataParallel each replica normalises with its own B/N slice of the batch, and
only replica 0's running statistics are kept (its buffers are the original's storage),
so the statistics come from 1/N of the data. Small per-GPU batches make this worse.
`nn.SyncBatchNorm` does not help: without a process group it silently acts as plain
BatchNorm under DataParallel, with no warning; nor does `SynchronizedBatchNorm2d`, whose replicas
synchronise only through the callback `DataParallelWithCallback` (or a DataParallel patched by
`patch_replication_callback`) installs. A conversion behind a flag (`if args.sync_bn:`)
in a script whose DataParallel wrapping is not under that flag meets DataParallel only in
one combination of options: a warning.

## How to fix
Use a larger per-GPU batch or GroupNorm/LayerNorm, or move to DistributedDataParallel
with SyncBatchNorm.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.context import code_names
from dpcheck.analysis.torch_api import BATCHNORM_LAYERS
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class BatchNormStatisticsPerReplica(Rule):
    code = "DP602"
    name = "batchnorm-statistics-per-replica"
    severity = Severity.INFO
    # Measured in a training-mode run: each replica's chunk statistics against the whole batch's.
    confirms = frozenset({K.BATCHNORM_STATS_PER_REPLICA})
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
                if resolved.startswith("torch.nn.") and last in BATCHNORM_LAYERS:
                    yield self.violation(value, f"`self.{name}` is {last}: under DataParallel it normalises "
                                         "each replica's B/N slice and keeps replica 0's running statistics")
                    return
        found = _batchnorm_built_in(model)
        if found is not None:
            call, what = found
            yield self.violation(call, f"{what} builds BatchNorm layers: under DataParallel each one "
                                 "normalises its replica's B/N slice and keeps replica 0's running statistics")

    def check_file(self, ctx):
        if not _wraps_in_dataparallel(ctx):
            return
        from dpcheck.analysis.scripts import script_facts

        imported = _unpatched_synchronized_bn(ctx)
        if imported:
            for dp in ctx.dataparallel_calls:
                yield self.violation(dp, f"This script imports `{imported}` from the Synchronized-BatchNorm package "
                                     "but wraps in plain nn.DataParallel without `patch_replication_callback` or "
                                     "`DataParallelWithCallback`: SynchronizedBatchNorm layers "
                                     "synchronise only under DataParallelWithCallback or a patched DataParallel, "
                                     "so any the model builds silently normalise each replica's slice alone",
                                     severity=Severity.WARNING)

        facts = script_facts(ctx)
        for node in ctx.nodes(ast.Call):
            # A wrapper in the same function counts unless it is on the other arm (DDP vs DP).
            local = [dp for dp in ctx.dataparallel_calls if facts.scope_of(dp) is facts.scope_of(node)]
            if (ctx.resolve(node.func) or "").endswith("convert_sync_batchnorm") \
                    and not (local and all(facts.exclusive(node, dp) for dp in local)):
                if local and all(facts.guarded_apart(node, dp) for dp in local):
                    yield self.violation(node, "`convert_sync_batchnorm` behind a flag, in a script that may wrap "
                                         "the model in nn.DataParallel: with the flag on and DataParallel chosen, "
                                         "SyncBatchNorm silently acts as plain per-replica BatchNorm",
                                         severity=Severity.WARNING)
                    continue
                yield self.violation(node, "`convert_sync_batchnorm` on a model wrapped in nn.DataParallel: "
                                     "SyncBatchNorm needs DistributedDataParallel; here it silently acts as "
                                     "plain BatchNorm", severity=Severity.ERROR)


def _wraps_in_dataparallel(ctx) -> bool:
    return bool(ctx.dataparallel_calls)


# vacancy's Synchronized-BatchNorm-PyTorch, vendored by projects as a `sync_batchnorm` package:
# its layers synchronise through a callback that only these two install on the replicas.
_SYNC_BN_PACKAGE = "sync_batchnorm"
_SYNC_BN_CALLBACKS = ("patch_replication_callback", "DataParallelWithCallback")


def _unpatched_synchronized_bn(ctx) -> str | None:
    """The first name this file imports from a `sync_batchnorm` package, where the file neither
    calls `patch_replication_callback` nor builds a `DataParallelWithCallback`; else None."""
    if _SYNC_BN_PACKAGE not in ctx.source.text:
        return None
    imported = [name for name, target in ctx.imports.aliases.items() if f"{_SYNC_BN_PACKAGE}." in f"{target}."]
    if not imported:
        return None
    for call in ctx.nodes(ast.Call):
        if (ctx.resolve(call.func) or "").rsplit(".", 1)[-1] in _SYNC_BN_CALLBACKS:
            return None
    return imported[0]


# Building blocks that contain BatchNorm by default, known by name.
_BATCHNORM_BLOCKS = frozenset({
    "torchvision.ops.Conv2dNormActivation", "torchvision.ops.Conv3dNormActivation",
    "torchvision.ops.misc.Conv2dNormActivation", "torchvision.ops.misc.Conv3dNormActivation",
    "timm.layers.ConvNormAct", "timm.layers.BatchNormAct2d", "timm.layers.norm_act.BatchNormAct2d",
})
_BATCHNORM_BACKBONES = ("resnet", "resnext", "wide_resnet", "densenet", "mobilenet", "efficientnet_b",
                        "inception_v3", "googlenet", "shufflenet", "mnasnet", "regnet_", "vgg11_bn", "vgg13_bn",
                        "vgg16_bn", "vgg19_bn", "squeezenet")


def _may_build_batchnorm(ctx) -> bool:
    """Can a call of this file resolve to a BatchNorm layer, a block that defaults to one (all
    named *NormAct*), or a torchvision backbone? Most model files name none of these, and then no
    method's calls need resolving."""
    names = ctx.fact(code_names)
    return "BatchNorm" in names or "NormAct" in names or "torchvision" in names


def _batchnorm_built_in(model):
    """(call, description) for BatchNorm built anywhere in the class's methods other than as a
    direct attribute: inside `nn.Sequential(...)`/`nn.ModuleList`, appended to a layer list, a
    torchvision/timm block that defaults to BatchNorm, or a torchvision backbone."""
    if not model.ctx.fact(_may_build_batchnorm):
        return None
    resolve = model.ctx.resolve
    for fn in model.all_methods:
        if fn.name == "forward":
            continue
        for call in fn.nodes(ast.Call):
            resolved = resolve(call.func) or ""
            last = resolved.rsplit(".", 1)[-1]
            if resolved.startswith("torch.nn.") and last in BATCHNORM_LAYERS:
                return call, f"`{ast.unparse(call.func)}` in `{fn.name}`"
            if resolved in _BATCHNORM_BLOCKS and not any(k.arg == "norm_layer" for k in call.keywords):
                return call, f"`{ast.unparse(call.func)}` (BatchNorm by default)"
            if resolved.startswith("torchvision.models.") and last.startswith(_BATCHNORM_BACKBONES):
                return call, f"the torchvision backbone `{last}`"
    return None
