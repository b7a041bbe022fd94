"""
## What it does
Flags `register_forward_hook`, `register_forward_pre_hook`, `register_full_backward_hook`
and the other `register_*_hook` calls, and hook handle `.remove()` calls, in code that
runs during `forward`.

Not `x.register_hook(...)` on a tensor the call computes itself (`x = x * 1.0`, a layer's output, or
forward's own input, scattered to each replica): a tensor hook, the gradient-reversal idiom, lives
on that replica's tensor, not in the module's hook dicts. A tensor hook on a Parameter (`self.weight`,
a name bound to it) stays reported.

A call that runs only behind a non-default option (inside `if self.keep:` with `keep=False`, or
after `if self.layer == -1: return self.net(x)` with `layer=-1`, also in a helper that forward calls
only there) is latent: a warning, with the message saying so.

## Why is this bad?
The hook dicts (`_forward_hooks` and friends) are shared by reference between the
module and all its DataParallel replicas. Registering or removing hooks from N replica
threads at once races on those dicts: hooks fire the wrong number of times (142 calls
where 100 were expected after 50 forwards on two GPUs), handles remove another
replica's hook, and hooks pile up across calls.

## How to fix
Register hooks once, outside forward (in `__init__` or in the training script), and
remove them there.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_binding
from dpcheck.analysis.context import code_names
from dpcheck.analysis.dataflow import OPTION_PATH_NOTE, option_constructions, parameters_of
from dpcheck.analysis.model_class import registers_hooks
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class HookRegisteredInForward(Rule):
    code = "DP105"
    name = "hook-registered-in-forward"
    severity = Severity.ERROR
    forward_code_only = True
    summary = "Registering or removing hooks inside forward races on hook dicts shared by all replicas"
    fix_hint = "Register hooks once in __init__ or in the training script"
    bad_example = """
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                handle = self.fc.register_forward_hook(lambda m, i, o: None)
                out = self.fc(x)
                handle.remove()
                return out
    """
    good_example = """
        class Probe(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.handle = self.fc.register_forward_hook(lambda m, i, o: None)

            def forward(self, x):
                return self.fc(x)
    """

    def check_class(self, model):
        if not model.ctx.fact(_touches_hooks):
            return
        for fn in model.reachable:
            handles = {name for name, values in fn.local_values.items()
                       if any(_is_registration(v) and not _on_own_activation(model, fn, v) for v in values)}
            for call in fn.nodes(ast.Call):
                func = call.func
                if _is_registration(call):
                    if _on_own_activation(model, fn, call):
                        continue  # a tensor hook on this call's own tensor: no replica shares it
                    yield self._report(model, fn, call, f"`{func.attr}` inside forward: hook dicts are shared by "
                                       "every DataParallel replica, so threads register concurrently "
                                       "and hooks fire the wrong number of times")
                elif isinstance(func, ast.Attribute) and func.attr == "remove" and not call.args:
                    receiver = func.value
                    if (isinstance(receiver, ast.Name) and receiver.id in handles) or \
                            "handle" in ast.unparse(receiver).lower() or "hook" in ast.unparse(receiver).lower():
                        yield self._report(model, fn, call, "Hook handle removed inside forward: replicas share "
                                           "the hook dicts, so one replica thread can remove hooks the "
                                           "others still rely on")

    def _report(self, model, fn, call, message):
        """An error, or a warning where the call runs only behind a non-default option (latent)."""
        if (settled := option_constructions(model, fn, call)) is not None:
            return self.violation(call, message + OPTION_PATH_NOTE, severity=Severity.WARNING, **settled)
        return self.violation(call, message)


def _touches_hooks(ctx) -> bool:
    """Does the file register a hook (`*.register_*hook`) or call a `remove` at all? Most model
    files do neither, and then no class's forward code needs searching."""
    return ctx.fact(registers_hooks) or "remove" in ctx.fact(code_names)


def _on_own_activation(model, fn, call) -> bool:
    """`x.register_hook(...)` (the Tensor method; modules have none by that name) on a name holding a
    tensor this call computed where the hook is registered (``_computed``: `x = x * 1.0`,
    `h = self.fc(x)`), or, in the class's forward, on an input it was handed and never rebinds to
    anything else (scatter's chunk): a tensor hook on a tensor of this replica's own call, which
    neither races with the other replicas nor outlives the call."""
    func = call.func
    if func.attr != "register_hook" or not isinstance(func.value, ast.Name):
        return False
    name = func.value.id
    binding = reaching_binding(fn, name, call)
    if isinstance(binding, ast.Assign):
        return _computed(model, fn, binding.value)
    forward = model.forward
    return forward is not None and fn.node is forward.node and name in parameters_of(fn) \
        and all(_computed(model, fn, value) for value in fn.local_values.get(name, ()))


# Calls that hand back an object they are given or look up (`getattr(self, "weight")`,
# `next(self.parameters())`), which may be a Parameter rather than a new tensor.
_LOOKUPS = frozenset({"getattr", "next", "iter"})


def _computed(model, fn, value) -> bool:
    """Is ``value`` a new tensor the expression computes (arithmetic, a layer's output, a tensor
    method or torch function), not a reference to a held one (`self.weight`, `p`, `ps[0]`) or what a
    method of the class or a look-up returns?"""
    if isinstance(value, (ast.BinOp, ast.UnaryOp)):
        return True
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Name):
        return func.id not in _LOOKUPS
    if fn.self_attr(func) is not None:
        return model.find_method(func.attr) is None  # `self.fc(x)`: a layer's output
    return isinstance(func, ast.Attribute) and func.attr not in ("parameters", "named_parameters")


def _is_registration(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr.startswith("register_") and node.func.attr.endswith("hook")
