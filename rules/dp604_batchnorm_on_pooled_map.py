"""
## What it does
Flags a BatchNorm layer that normalises a globally pooled map: in one `nn.Sequential` (built
with `nn.Sequential(...)`, or by `super().__init__(...)` in a subclass of it), an adaptive pool
to size 1 (`nn.AdaptiveAvgPool2d(1)`, `nn.AdaptiveMaxPool2d((1, 1))`...) followed by
`nn.BatchNorm1d/2d/3d`, with only layers between them that keep one value per channel
(convolutions, `nn.Linear`, activations, dropout, `nn.Flatten`). This is the image-pooling branch
of ASPP (DeepLabV3) and the bin-1 stage of PSP pooling.

## Why is this bad?
The pooled map holds one value per channel per sample, so BatchNorm in training normalises over
the batch alone, and with one sample it raises `Expected more than 1 value per channel when
training`. Unwrapped, that needs a batch of one. Under DataParallel each replica gets a chunk of
`ceil(B/N)` samples and the last replica what is left, so an ordinary batch whose size leaves a
remainder of one (the last batch of an epoch: 9 samples on 8 GPUs, 7 split 2, 2, 2, 1 on 4) hands
a replica one sample and training stops there. Latent: it needs such a batch, so a warning; not
reported when every scanned script that wraps a model builds a DataLoader with `drop_last=True`
(the last, partial batch is then never run; evaluation runs BatchNorm on its running statistics).

## How to fix
Pass `drop_last=True` to the training DataLoader and use batches of at least twice the GPU count,
or normalise the pooled branch with something that does not need a batch (`nn.GroupNorm`, no norm).
"""

from __future__ import annotations

import ast

from dpcheck.analysis.context import code_names
from dpcheck.analysis.scripts import PARTIAL_BATCHES_CONDITION
from dpcheck.analysis.torch_api import BATCHNORM_LAYERS
from dpcheck.findings import Severity
from dpcheck.rule import Rule

_GLOBAL_POOLS = frozenset({"AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
                           "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"})
# Layers that map a (B, C, 1, ...) map to one of the same kind: one value per channel per sample.
_KEEPS_ONE_VALUE = frozenset({"Conv1d", "Conv2d", "Conv3d", "Linear", "Flatten", "Identity", "Dropout",
                              "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "ReLU", "ReLU6",
                              "LeakyReLU", "PReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "ELU", "Mish",
                              "Hardswish", "Hardsigmoid", "Softplus"})


class BatchNormOnPooledMap(Rule):
    code = "DP604"
    name = "batchnorm-on-pooled-map"
    severity = Severity.WARNING
    summary = "BatchNorm after a pool to 1x1 raises in training on a replica given one sample"
    fix_hint = "Use drop_last=True with batches of at least twice the GPU count, or GroupNorm on the pooled branch"
    # BatchNorm's own error, raised by the DataParallel run at a batch other than the first (which ran).
    _RAISED = "more than 1 value per channel"
    bad_example = """
        class ImagePooling(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.branch = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, 256, 1),
                                            nn.BatchNorm2d(256), nn.ReLU())

            def forward(self, x):
                return self.branch(x)
    """
    good_example = """
        class ImagePooling(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.branch = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, 256, 1),
                                            nn.GroupNorm(32, 256), nn.ReLU())

            def forward(self, x):
                return self.branch(x)
    """

    def check_class(self, model):
        if not model.ctx.fact(_may_pool_into_batchnorm):
            return
        resolve = model.ctx.resolve
        sequential = any(base.rsplit(".", 1)[-1] == "Sequential" and base.startswith("torch.nn.")
                         for base in model.info.bases)
        for fn in model.all_methods:
            for call in fn.nodes(ast.Call):
                if resolve(call.func) == "torch.nn.Sequential" or (sequential and _super_init(call)):
                    found = _pooled_batchnorm(_layers(call, fn), resolve)
                    if found is not None:
                        pool, norm = found
                        yield self.violation(
                            norm, f"`{ast.unparse(norm.func)}` normalises the output of `{ast.unparse(pool)}`, one "
                            "value per channel per sample: in training, a DataParallel replica given one sample "
                            "(a batch that leaves a remainder of one over the GPUs) raises 'Expected more than 1 "
                            "value per channel when training'",
                            requires=(frozenset({f"{PARTIAL_BATCHES_CONDITION}{model.info.qualname}"}),))

    def matches(self, finding, observation, ran):
        # The harness's uneven batches hand a replica one sample: BatchNorm raises in the class's forward.
        return super().matches(finding, observation, ran) or (
            ran and observation.raised and "first_batch_ran" in observation.details
            and self._RAISED in observation.evidence and self.matches_subject(finding, observation))


def _may_pool_into_batchnorm(ctx) -> bool:
    """Does the file name both an adaptive pool and a BatchNorm? Most name neither, and then no
    method's calls need resolving."""
    names = ctx.fact(code_names)
    return "Adaptive" in names and "BatchNorm" in names


def _super_init(call: ast.Call) -> bool:
    """`super().__init__(...)` or `super(Cls, self).__init__(...)`."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call) \
        and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"


def _layers(call: ast.Call, fn) -> list[ast.AST]:
    """The layers a Sequential call is given, in order: its arguments, a single `*name` read as the
    list literal `name` is bound to (when nothing else binds or mutates it), and each argument that
    is a name bound once in the function read as that value (`prior = nn.AdaptiveAvgPool2d(1)`)."""
    args = call.args
    if len(args) == 1 and isinstance(args[0], ast.Starred) and isinstance(args[0].value, ast.Name):
        value = _only_binding(args[0].value.id, fn)
        if not isinstance(value, ast.List) or _mutated(args[0].value.id, fn):
            return []
        args = value.elts
    layers = []
    for arg in args:
        if isinstance(arg, ast.Name):
            arg = _only_binding(arg.id, fn) or arg
        layers.append(arg)
    return layers


def _only_binding(name: str, fn):
    """The value of the one `name = value` in the function, else None (a parameter, a loop
    variable, or bound more than once)."""
    values = [node.value for node in fn.nodes(ast.Assign)
              if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name]
    if len(values) != 1:
        return None
    stores = [n for n in fn.nodes(ast.Name) if n.id == name and isinstance(n.ctx, ast.Store)]
    return values[0] if len(stores) == 1 else None


def _mutated(name: str, fn) -> bool:
    """Does the function change the list `name` after binding it (`name.append(...)`, `name += ...`)?"""
    for node in fn.nodes(ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == name \
                and node.attr in ("append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"):
            return True
    return any(isinstance(node.target, ast.Name) and node.target.id == name for node in fn.nodes(ast.AugAssign))


def _pooled_batchnorm(layers: list[ast.AST], resolve) -> tuple[ast.AST, ast.Call] | None:
    """(the pool, the BatchNorm call) of the first BatchNorm that sees a pool's one value per channel."""
    pool = None
    for layer in layers:
        if not isinstance(layer, ast.Call):
            pool = None  # a layer not known here may reshape the map
            continue
        resolved = resolve(layer.func) or ""
        last = resolved.rsplit(".", 1)[-1] if resolved.startswith("torch.nn.") else ""
        if last in _GLOBAL_POOLS:
            pool = layer if _size_one(layer) else None
        elif pool is not None and last in BATCHNORM_LAYERS:
            return pool, layer
        elif last not in _KEEPS_ONE_VALUE:
            pool = None
    return None


def _size_one(pool: ast.Call) -> bool:
    """`AdaptiveAvgPool2d(1)`, `(1, 1)` or `output_size=1`: every pooled dim of size 1."""
    size = pool.args[0] if pool.args else next((k.value for k in pool.keywords if k.arg == "output_size"), None)
    values = size.elts if isinstance(size, ast.Tuple | ast.List) else [size]
    return bool(values) and all(isinstance(v, ast.Constant) and v.value == 1 and not isinstance(v.value, bool)
                                for v in values)
