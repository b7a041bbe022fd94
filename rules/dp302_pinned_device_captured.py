"""
## What it does
Flags a device captured outside forward and then used for placement inside it:
`self.device = torch.device("cuda:0")` or `self.device = next(self.parameters()).device`
in `__init__`, or a module-level `DEVICE = "cuda:1"`, followed by `x.to(self.device)`,
`torch.zeros(n, device=DEVICE)` or `.cuda(self.device)` in forward.

## Why is this bad?
Attributes that are not Parameters, buffers or submodules are shared by reference with
every DataParallel replica. A device captured once is the *original's* device
(usually `cuda:0`) on every replica, so replica 1 creates its tensors on `cuda:0`
and fails with `Expected all tensors to be on the same device`.

Not flagged: `torch.device("cuda")` with no index, and
`torch.device("cuda" if torch.cuda.is_available() else "cpu")`, which follow the
replica's current device.

## How to fix
Read the device from the input inside forward (`x.device`), or capture
`torch.device("cuda")` without an index.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.devices import (
    parameter_device,
    pinned_device,
    placement_arguments,
)
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class PinnedDeviceCaptured(Rule):
    code = "DP302"
    name = "pinned-device-captured"
    severity = Severity.ERROR
    confirms = frozenset({K.DEVICE_MISMATCH})
    summary = "A device captured outside forward (an index, or the parameters' device) pins every replica"
    fix_hint = "Use x.device inside forward instead of a stored device"
    bad_example = """
        class Noisy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.device = next(self.parameters()).device

            def forward(self, x):
                return self.fc(x) + torch.randn(x.shape, device=self.device)
    """
    good_example = """
        class Noisy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

            def forward(self, x):
                return self.fc(x) + torch.randn(x.shape, device=x.device).to(self.device)
    """

    def check_class(self, model):
        ctx = model.ctx
        captured_attrs: dict[str, str] = {}
        for name, facts in model.attrs.items():
            if facts.registered:
                continue
            for _target, value, fn in facts.assignments:
                why = _pinned(value, fn.is_self, ctx)
                if not why and isinstance(value, ast.Name) and fn.name == "__init__":
                    why = _pinned_argument(model, fn, value.id)
                if why:
                    captured_attrs[name] = why
        captured_globals = {name: why for name, values in ctx.module_level_values.items()
                            for value in values for why in [_pinned(value, lambda n: False, ctx)] if why}
        if not captured_attrs and not captured_globals:
            return
        for fn in model.reachable:
            for call in fn.nodes(ast.Call):
                for arg in placement_arguments(call):
                    attr = fn.self_attr(arg)
                    if attr in captured_attrs:
                        yield self.violation(arg, f"`self.{attr}` is {captured_attrs[attr]} captured "
                                             "outside forward: every DataParallel replica places "
                                             "tensors on that one device", fix=_FOLLOW_INPUT)
                    elif isinstance(arg, ast.Name) and arg.id in captured_globals \
                            and arg.id not in fn.local_values:
                        yield self.violation(arg, f"`{arg.id}` is {captured_globals[arg.id]} "
                                             "defined at module level: every DataParallel replica "
                                             "places tensors on that one device", fix=_FOLLOW_INPUT)

    def fix(self, finding, editor):
        source = editor.first_input(editor.node)
        if source:
            editor.replace_with_code(editor.node, f"{source}.device")


_FOLLOW_INPUT = Rule.offer_fix("Use the input's device (forward's first tensor argument)")


def _pinned(value, is_self, ctx) -> str | None:
    text = pinned_device(value, ctx.resolve)
    if text:
        return f"a fixed device ({text})"
    if parameter_device(value, is_self):
        return "the original module's parameter device"
    return None


def _pinned_argument(model, init, name: str) -> str | None:
    """`self.device = device` in `__init__`: a local bound to a pinned device, a parameter whose
    default pins one, or one that a construction of this class in the same file passes a
    pinned device to (directly or through a module-level constant)."""
    ctx = model.ctx
    for value in init.local_values.get(name, ()):
        if pinned_device(value, ctx.resolve):
            return f"a fixed device ({pinned_device(value, ctx.resolve)})"
    args = init.node.args
    positional = args.posonlyargs + args.args
    params = [a.arg for a in positional][1:]
    if name not in params and name not in [a.arg for a in args.kwonlyargs]:
        return None
    defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    if name in defaults and _pinned_value(defaults[name], ctx):
        return f"a fixed device (the default `{name}={ast.unparse(defaults[name])}`)"
    for call in _constructions(ctx, model.name):
        passed = next((k.value for k in call.keywords if k.arg == name), None)
        if passed is None and name in params and params.index(name) < len(call.args):
            passed = call.args[params.index(name)]
        if passed is not None and _pinned_value(passed, ctx):
            return f"a fixed device (`{ast.unparse(passed)}` passed as `{name}` on line {call.lineno})"
    return None


def _pinned_value(node, ctx) -> bool:
    if pinned_device(node, ctx.resolve):
        return True
    return isinstance(node, ast.Name) and any(pinned_device(v, ctx.resolve)
                                              for v in ctx.module_level_values.get(node.id, ()))


def _constructions(ctx, class_name: str):
    qualified = f"{ctx.module}.{class_name}"
    for call in ctx.nodes(ast.Call):
        if isinstance(call.func, ast.Name) and call.func.id == class_name or ctx.resolve(call.func) == qualified:
            yield call
