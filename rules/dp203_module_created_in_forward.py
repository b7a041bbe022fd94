"""
## What it does
Flags an `nn.Module` or `nn.Parameter` constructed in code that runs during `forward`
and kept on `self`: `self.head = nn.Linear(...)` built lazily on the first call,
`self.register_parameter(...)`, `self.add_module(...)` or `self.blocks.append(Block())`
inside forward.

## Why is this bad?
Under DataParallel the new module is attached to a replica and thrown away with it:
the original never gets it, so it is re-created, freshly initialised, on every call
and on every GPU. Its weights are never trained or saved, and outputs differ from a
single-device run.

A weightless layer (`nn.ZeroPad2d`, `nn.ReLU`) built lazily, or a frozen table
(`nn.Parameter(..., requires_grad=False)`), loses nothing trained: it is only rebuilt on
every call, a speed cost (a warning: cost-only). A weightless layer that every call builds
afresh (no lazy guard) and reads only after building it, in the same method, is not
reported: each call uses its own, as on one device (`self.up = nn.Upsample(size=...)`
sized to this call's input, then `self.up(h)`).

## How to fix
Build every submodule in `__init__` (use `nn.LazyLinear` and friends when a size is only
known from the first input, and run one forward before wrapping the model).
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import under_lazy_guard, written_earlier
from dpcheck.analysis.torch_api import parameter_free
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity, Subject
from dpcheck.rule import Rule


class ModuleCreatedInForward(Rule):
    code = "DP203"
    name = "module-created-in-forward"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.SUBMODULES_NOT_KEPT, K.STATE_LOST_ON_REPLICA, K.DEVICE_MISMATCH, K.VALUES_DIFFER})
    summary = "A module or Parameter created in forward and kept on self never reaches the original model"
    fix_hint = "Create submodules in __init__ (nn.Lazy* modules cover sizes known only at the first call)"
    bad_example = """
        class LazyHead(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = None

            def forward(self, x):
                if self.head is None:
                    self.head = nn.Linear(x.shape[-1], 2)
                return self.head(x)
    """
    good_example = """
        class LazyHead(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.LazyLinear(2)

            def forward(self, x):
                scale = nn.functional.softmax(x, dim=-1)
                return self.head(x * scale)
    """

    def check_class(self, model):
        for fn in model.reachable:
            for node in fn.nodes(ast.Assign, ast.Call):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        name = fn.self_attr(target)
                        if name is not None:
                            yield from self._report(model, target, f"self.{name}", node.value, fn, name)
                    continue
                func = node.func
                if not isinstance(func, ast.Attribute):
                    continue
                if func.attr in ("register_parameter", "add_module", "register_module") and \
                        fn.is_self(func.value) and len(node.args) >= 2:
                    key = node.args[0]
                    registered = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
                    where = f"self.{registered}" if registered else f"self.{func.attr}(...)"
                    yield from self._report(model, node, where, node.args[1], fn, registered)
                elif func.attr in ("append", "extend", "insert", "__setitem__") and node.args \
                        and fn.self_attr(func.value) is not None:
                    yield from self._report(model, node, ast.unparse(func.value), node.args[-1],
                                            attr=fn.self_attr(func.value))

    def _report(self, model, node, where, value, fn=None, attr=None):
        kind, _, requires = model.classify(value)
        if kind not in ("module", "parameter", "maybe_module"):
            return
        what = "Parameter" if kind == "parameter" else "module"
        name = model.ctx.resolve(value.func) if isinstance(value, ast.Call) else None
        if kind == "module" and name and parameter_free(name) and fn is not None and attr is not None \
                and isinstance(node, ast.Attribute) and _built_for_each_call(model, fn, node, attr):
            return
        if kind == "module" and name and parameter_free(name) and fn is not None and under_lazy_guard(fn, node):
            yield self.violation(node, f"A weightless {name.rsplit('.', 1)[-1]} built lazily in forward is kept on "
                                 f"`{where}`: under DataParallel it is lost with the replica and rebuilt on "
                                 "every call (a speed cost only)", severity=Severity.WARNING,
                                 subject=Subject(attr=attr))
            return
        if kind == "parameter" and _frozen(fn, where, value):
            yield self.violation(node, f"A frozen Parameter (requires_grad=False) built in forward is kept on "
                                 f"`{where}`: under DataParallel it is lost with the replica and rebuilt on "
                                 "every call (a speed cost: it is never trained)", severity=Severity.WARNING,
                                 subject=Subject(attr=attr))
            return
        yield self.violation(node, f"A {what} created in forward is kept on `{where}`: under "
                             "DataParallel it lands on a replica and is lost, so it is re-created "
                             "(untrained) on every call", requires=(frozenset(requires),) if requires else ())


def _built_for_each_call(model, fn, target: ast.Attribute, attr: str) -> bool:
    """Is the weightless module stored by ``target`` in ``fn`` this call's own: built on every call
    (no lazy guard) and read only in ``fn`` after a store of it on every path? Then no call reads
    another call's module, and nothing is kept that a replica could lose (rsis' decoder stores
    `self.upsample = nn.UpsamplingBilinear2d(size=<this call's size>)` and applies it at once). A read
    anywhere else (another method, before the store) may see an older one: still reported."""
    if under_lazy_guard(fn, target):
        return False
    for method in model.all_methods:
        for node in method.nodes(ast.Attribute):
            if isinstance(node.ctx, ast.Load) and method.self_attr(node) == attr and not (
                    method.node is fn.node and written_earlier(fn, attr, node)):
                return False
    return True


def _frozen(fn, where: str, value) -> bool:
    """`nn.Parameter(t, requires_grad=False)`, or `self.w = nn.Parameter(t)` followed by
    `self.w.requires_grad = False` / `self.w.requires_grad_(False)`: a table, never trained."""
    if isinstance(value, ast.Call) and any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant)
                                           and k.value.value is False for k in value.keywords):
        return True
    if fn is None or not where.startswith("self."):
        return False
    name = where[len("self."):]
    for node in fn.nodes(ast.Assign):
        if isinstance(node.value, ast.Constant) and node.value.value is False and any(
                isinstance(t, ast.Attribute) and t.attr == "requires_grad" and fn.self_attr(t.value) == name
                for t in node.targets):
            return True
    for call in fn.nodes(ast.Call):
        if isinstance(call.func, ast.Attribute) and call.func.attr == "requires_grad_" \
                and fn.self_attr(call.func.value) == name and call.args \
                and isinstance(call.args[0], ast.Constant) and call.args[0].value is False:
            return True
    return False
