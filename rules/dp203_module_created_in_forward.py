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
every call, a speed cost (a warning: cost-only).

## How to fix
Build every submodule in `__init__` (use `nn.LazyLinear` and friends when a size is only
known from the first input, and run one forward before wrapping the model).
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import under_lazy_guard
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
