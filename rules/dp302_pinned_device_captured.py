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
replica's current device; nor a read that forward's own write of the attribute precedes on
every path (`self.device = x.device` at the top of forward, then `torch.zeros(..., device=self.device)`
there or in a method it calls after): the replica writes its own copy, and the read sees it.

## How to fix
Read the device from the input inside forward (`x.device`), or capture
`torch.device("cuda")` without an index.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import accumulation_started_in_call, keyword, parameter_defaults
from dpcheck.analysis.devices import (
    input_to_follow,
    parameter_device,
    pinned_device,
    placement_arguments,
)
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class PinnedDeviceCaptured(Rule):
    code = "DP302"
    name = "pinned-device-captured"
    severity = Severity.ERROR
    forward_code_only = True
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
        placed = [(fn, arg) for fn in model.reachable for call in fn.nodes(ast.Call)
                  for arg in placement_arguments(call)]
        if not placed:
            return
        # Only attributes forward places tensors with are worth tracing back to their values.
        placed_attrs = {attr for fn, arg in placed for attr in [fn.self_attr(arg)] if attr is not None}
        captured_attrs: dict[str, str] = {}
        # Attributes forward itself sets to a fixed device: a read after such a write is pinned too.
        pinned_in_forward: set[str] = set()
        in_forward = {fn.node for fn in model.reachable}
        for name, facts in model.attrs.items():
            if facts.registered or name not in placed_attrs:
                continue
            for _target, value, fn in facts.assignments:
                why = _pinned(value, fn.is_self, ctx)
                if not why and isinstance(value, ast.Name) and fn.name == "__init__":
                    why = _pinned_argument(model, fn, value.id)
                if why:
                    captured_attrs[name] = why
                    if fn.node in in_forward:
                        pinned_in_forward.add(name)
        captured_globals = {name: why for name, values in ctx.module_level_values.items()
                            for value in values for why in [_pinned(value, lambda n: False, ctx)] if why}
        if not captured_attrs and not captured_globals:
            return
        for fn, arg in placed:
            attr = fn.self_attr(arg)
            if attr in captured_attrs and (attr in pinned_in_forward
                                           or not accumulation_started_in_call(model, fn, attr, arg)):
                yield self.violation(arg, f"`self.{attr}` is {captured_attrs[attr]} captured "
                                     "outside forward: every DataParallel replica places "
                                     "tensors on that one device", fix=_follow_input(fn, arg))
            elif isinstance(arg, ast.Name) and arg.id in captured_globals \
                    and arg.id not in fn.local_values:
                yield self.violation(arg, f"`{arg.id}` is {captured_globals[arg.id]} "
                                     "defined at module level: every DataParallel replica "
                                     "places tensors on that one device", fix=_follow_input(fn, arg))

    def fix(self, finding, editor):
        source = editor.first_input(editor.node)
        if source:
            editor.replace_with_code(editor.node, f"{source}.device")


_FOLLOW_INPUT = Rule.offer_fix("Use the input's device (forward's first tensor argument)")


def _follow_input(fn, arg):
    """The fix for ``arg``, where there is an input to follow (in forward itself)."""
    return _FOLLOW_INPUT if input_to_follow(fn, arg) else None


def _pinned(value, is_self, ctx) -> str | None:
    text = pinned_device(value, ctx.resolve)
    if text:
        return f"a fixed device ({text})"
    if parameter_device(value, is_self):
        return "the original module's parameter device"
    return None


def _pinned_argument(model, init, name: str) -> str | None:
    """`self.device = device` in `__init__`: see ``_pinned_parameter``."""
    return _pinned_parameter(model.ctx, model.name, init.node, name, 0)


def _pinned_parameter(ctx, class_name: str, init: ast.FunctionDef, name: str, depth: int) -> str | None:
    """Is the `__init__` parameter (or local) ``name`` a pinned device? A local bound to a pinned
    device, a parameter whose default pins one, one that the class requires to name a GPU index
    (`str(gpus[0]) in device`), or one that a construction of this class in the same file passes
    a pinned device to: directly, through a module-level constant, or through a parameter of the
    `__init__` of another class of this file that is itself pinned (`Linear(..., device=device)`
    inside `BaseModel.__init__`)."""
    if depth > 3:
        return None
    for value in _assigned(init, name):
        if pinned_device(value, ctx.resolve):
            return f"a fixed device ({pinned_device(value, ctx.resolve)})"
    args = init.args
    positional = args.posonlyargs + args.args
    params = [a.arg for a in positional][1:]
    if name not in params and name not in [a.arg for a in args.kwonlyargs]:
        return None
    defaults = parameter_defaults(args)
    if name in defaults and _pinned_value(defaults[name], ctx):
        return f"a fixed device (the default `{name}={ast.unparse(defaults[name])}`)"
    required = _index_required(init, name)
    if required is not None:
        return (f"a fixed device (`{name}` must name a GPU index: `{ast.unparse(required)}` "
                f"on line {required.lineno})")
    for call in _constructions(ctx, class_name):
        passed = keyword(call, name)
        if passed is None and name in params and params.index(name) < len(call.args):
            passed = call.args[params.index(name)]
        if passed is None:
            continue
        if _pinned_value(passed, ctx):
            return f"a fixed device (`{ast.unparse(passed)}` passed as `{name}` on line {call.lineno})"
        outer = _enclosing_init(ctx, call)
        if isinstance(passed, ast.Name) and outer is not None:
            outer_class, outer_init = outer
            why = _pinned_parameter(ctx, outer_class, outer_init, passed.id, depth + 1)
            if why:
                return f"{why[:-1]}, passed on as `{name}` on line {call.lineno})"
    return None


def _assigned(fn: ast.FunctionDef, name: str) -> list[ast.AST]:
    return [node.value for node in ast.walk(fn) if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)]


def _index_required(init: ast.FunctionDef, name: str) -> ast.AST | None:
    """A test in ``init`` that only makes sense if the device ``name`` (or the `self.<attr>` it is
    stored in) names a GPU index: `str(gpus[0]) not in device`, `device.split(":")`."""
    stored = {t.attr for node in ast.walk(init) if isinstance(node, ast.Assign)
              and isinstance(node.value, ast.Name) and node.value.id == name
              for t in node.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
              and t.value.id == "self"}

    def is_device(node) -> bool:
        return (isinstance(node, ast.Name) and node.id == name) or (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
            and node.attr in stored)

    for node in ast.walk(init):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and is_device(node.comparators[0]) and isinstance(node.left, ast.Call) \
                and isinstance(node.left.func, ast.Name) and node.left.func.id == "str":
            return node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "split" \
                and is_device(node.func.value) and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == ":":
            return node
    return None


def _enclosing_init(ctx, node) -> tuple[str, ast.FunctionDef] | None:
    """(class name, its `__init__`) when ``node`` sits in the `__init__` of a class of this file."""
    cur = ctx.enclosing(node, FUNCTION_DEFS)
    if cur is None or cur.name != "__init__":
        return None
    owner = ctx.parent(cur)
    return (owner.name, cur) if isinstance(owner, ast.ClassDef) else None


def _pinned_value(node, ctx) -> bool:
    if pinned_device(node, ctx.resolve):
        return True
    return isinstance(node, ast.Name) and any(pinned_device(v, ctx.resolve)
                                              for v in ctx.module_level_values.get(node.id, ()))


def _constructions(ctx, class_name: str) -> list[ast.Call]:
    return ctx.fact(_calls_by_local_name).get(class_name, [])


def _calls_by_local_name(ctx) -> dict[str, list[ast.Call]]:
    """Calls of this file by the in-file name they call (`Net(...)`, `module.Net(...)`), in order."""
    found: dict[str, list[ast.Call]] = {}
    for call in ctx.nodes(ast.Call):
        func = call.func
        if isinstance(func, ast.Name):
            found.setdefault(func.id, []).append(call)
        elif isinstance(func, ast.Attribute):
            local = ctx.local_name(ctx.resolve(func))
            if local is not None:
                found.setdefault(local, []).append(call)
    return found
