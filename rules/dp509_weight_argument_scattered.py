"""
## What it does
Flags a call of an `nn.DataParallel` wrapper that passes a value to a forward parameter the wrapped
class uses as the weight or bias of a functional layer (`F.linear(x, weight=fast_weights[1],
bias=fast_weights[2])`, `F.conv2d(x, w, b)` after `w, b = vars[0], vars[1]`, `F.layer_norm(...,
weight=...)`): the weights-as-arguments forward of meta-learning code (MAML's fast weights), where
the caller hands in the module's own parameters or their updated copies. The wrapped class is read
where this file defines it. A call that leaves the parameter out, or passes `None`, is not
reported: forward then uses its own weights.

## Why is this bad?
DataParallel's scatter splits every tensor it is handed along dim 0, walking into lists, tuples
and dicts: a list of weights is split like a batch. Each replica gets a slice of the rows of every
weight, bias and LayerNorm scale (`(768/N, 768)` of a `(768, 768)` projection), so the layers raise
a shape mismatch on two or more GPUs, or, where the shapes still fit, compute with other weights
than the single-device run.

## How to fix
Keep the weights where replicate copies them: make them parameters of the wrapped module and read
them there, or wrap a module that calls the functional forward itself and pass only batch tensors
across the wrapper.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.analysis.wrapping import without_conversions
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule

_FUNCTIONAL = "torch.nn.functional."
# torch.nn.functional's layers and the positions and keywords of the weights they take.
_WEIGHT_ARGUMENTS: dict[str, tuple[tuple[int, str], ...]] = {
    **{op: ((1, "weight"), (2, "bias")) for op in (
        "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")},
    "bilinear": ((2, "weight"), (3, "bias")),
    "layer_norm": ((2, "weight"), (3, "bias")),
    "group_norm": ((2, "weight"), (3, "bias")),
    "batch_norm": ((3, "weight"), (4, "bias")),
    "instance_norm": ((3, "weight"), (4, "bias")),
    "embedding": ((1, "weight"),),
    "prelu": ((1, "weight"),),
}


class WeightArgumentScattered(Rule):
    code = "DP509"
    name = "weight-argument-scattered"
    severity = Severity.ERROR
    # The harness runs a model's forward on example inputs it builds, not the caller's weights.
    not_confirmable = TRAINING_SCRIPT
    summary = "Weights passed to a DataParallel model's forward are split along dim 0 like a batch"
    fix_hint = "Keep the weights as parameters of the wrapped module; pass only batch tensors through the wrapper"
    bad_example = """
        class Mapper(nn.Module):
            def __init__(self):
                super().__init__()
                self.vars = nn.ParameterList([nn.Parameter(torch.randn(8, 8)), nn.Parameter(torch.zeros(8))])

            def forward(self, x, fast_weights):
                return F.linear(x, fast_weights[0], fast_weights[1])

        mapper = nn.DataParallel(Mapper().cuda())
        out = mapper(torch.randn(16, 8).cuda(), list(mapper.module.parameters()))
    """
    good_example = """
        class Mapper(nn.Module):
            def __init__(self):
                super().__init__()
                self.vars = nn.ParameterList([nn.Parameter(torch.randn(8, 8)), nn.Parameter(torch.zeros(8))])

            def forward(self, x, fast_weights=None):
                weights = self.vars if fast_weights is None else fast_weights
                return F.linear(x, weights[0], weights[1])

        mapper = nn.DataParallel(Mapper().cuda())
        out = mapper(torch.randn(16, 8).cuda())
    """

    def check_file(self, ctx):
        if "functional" not in ctx.source.text or not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        weights_of: dict[str, dict[str, tuple[int, int | None]]] = {}
        for call in ctx.nodes(ast.Call):
            if not (call.args or call.keywords):
                continue
            wrap = facts.called_wrap(call)
            if wrap is None or wrap.inner is None or "scatter" in wrap.source.note:
                continue
            name = _wrapped_class(wrap, call, facts, ctx)
            info = ctx.classes.get(name) if name is not None else None
            if info is None:
                continue
            if name not in weights_of:
                weights_of[name] = _weight_parameters(info.node, ctx)
            weights = weights_of[name]
            if not weights:
                continue
            for param, value in _passed(call, weights):
                if isinstance(value, ast.Constant) and value.value is None:
                    continue
                yield self.violation(value, f"`{ast.unparse(value)}` reaches `{name}.forward`'s `{param}`, "
                                     f"which it uses as a layer's weight (line {weights[param][0]}): DataParallel's "
                                     "scatter splits every tensor it is handed along dim 0, in lists too, so each "
                                     "replica gets a slice of the rows of the weights (a shape mismatch, or other "
                                     "weights than one device uses)", requires=wrap.requires + wrap.keeps_stock("scatter"))


def _wrapped_class(wrap, at: ast.AST, facts, ctx) -> str | None:
    """The simple name of the class of this file the wrapper holds: the one every store of the name
    it wraps (`self.mapper = Mapper(...)`, then `self.mapper = nn.DataParallel(self.mapper)`) builds,
    the wrap and moves of the same name aside; None where the file shows no single class."""
    inner = without_conversions(wrap.inner)
    if isinstance(inner, ast.Call):
        return _built(inner, ctx)
    text = ast.unparse(inner)
    if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id == "self":
        scope = ctx.enclosing(at, ast.ClassDef)
    elif isinstance(inner, ast.Name):
        scope = ctx.enclosing(at, FUNCTION_DEFS) or ctx.tree
    else:
        return None
    if scope is None:
        return None
    wraps = {id(w.source.call) for w in facts.wraps}
    names = set()
    for node in ctx.tree_index.nodes_within(scope, ast.Assign):
        if not any(ast.unparse(t) == text for t in node.targets):
            continue
        value = without_conversions(node.value)
        if id(value) in wraps or id(node.value) in wraps or ast.unparse(value) == text:
            continue  # the wrap itself, or a move of the same model
        names.add(_built(value, ctx) if isinstance(value, ast.Call) else None)
    return names.pop() if len(names) == 1 else None


def _built(call: ast.Call, ctx) -> str | None:
    """The simple name of a class of this file that ``call`` builds, else None."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name if name in ctx.classes else None


def _weight_parameters(cls: ast.ClassDef, ctx) -> dict[str, tuple[int, int | None]]:
    """Forward's parameters (name -> the line of the first use, and the position a call binds it
    at, None for a keyword-only one) that reach a functional layer's
    weight or bias: the parameter itself, an item of it (`fast_weights[1]`), or a local name of
    forward bound to one of those (`w, b = vars[idx], vars[idx + 1]`)."""
    forward = next((n for n in cls.body if isinstance(n, FUNCTION_DEFS)
                    and n.name == "forward"), None)
    if forward is None:
        return {}
    arguments = forward.args
    positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)][1:]  # after `self`
    params = {*positional, *(a.arg for a in arguments.kwonlyargs)}
    if not params:
        return {}
    # Local names bound to a parameter or an item of one (one step: `w = vars[0]`).
    origin: dict[str, str] = {}
    for node in ctx.tree_index.nodes_within(forward, ast.Assign):
        for target in node.targets:
            pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) and isinstance(
                node.value, ast.Tuple) and len(target.elts) == len(node.value.elts) else [(target, node.value)]
            for name, value in pairs:
                root = _parameter_root(value, params)
                if isinstance(name, ast.Name) and root is not None and name.id not in params:
                    origin[name.id] = root
    found: dict[str, tuple[int, int | None]] = {}
    for call in ctx.tree_index.nodes_within(forward, ast.Call):
        resolved = ctx.resolve(call.func) or ""
        if not resolved.startswith(_FUNCTIONAL):
            continue
        for position, keyword in _WEIGHT_ARGUMENTS.get(resolved[len(_FUNCTIONAL):], ()):
            value = call.args[position] if position < len(call.args) else next(
                (k.value for k in call.keywords if k.arg == keyword), None)
            if value is None:
                continue
            root = _parameter_root(value, params)
            if root is None and isinstance(value, ast.Name):
                root = origin.get(value.id)
            if root is not None:
                found.setdefault(root, (call.lineno, positional.index(root) if root in positional else None))
    return found


def _parameter_root(value: ast.AST, params: set[str]) -> str | None:
    """The parameter ``value`` is, or is an item of (`p`, `p[1]`, `p[i][0]`), else None."""
    while isinstance(value, ast.Subscript):
        value = value.value
    return value.id if isinstance(value, ast.Name) and value.id in params else None


def _passed(call: ast.Call, weights: dict[str, tuple[int, int | None]]):
    """(parameter, value) for each argument of the wrapper call that binds one of ``weights``'
    parameters, by keyword or by position (among forward's positional parameters after `self`)."""
    for keyword in call.keywords:
        if keyword.arg in weights:
            yield keyword.arg, keyword.value
    for name, (_, position) in weights.items():
        if position is not None and position < len(call.args) \
                and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
            yield name, call.args[position]
