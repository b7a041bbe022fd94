"""
## What it does
In training scripts, flags a model moved to a GPU other than `device_ids[0]`
(`.to("cuda:1")`, `.cuda(1)`) before or after wrapping it in `nn.DataParallel`, and
(as a warning) a model built in the same function that is never moved to a GPU at all:
not before wrapping, not through the wrapper later in the file, not by its own class
(`self.to(device)` or `self.netG.to(device)` in `__init__`, in this file or another scanned
one), and not by code it is handed to (a builder that returns
it, a parameter, a function or method it is passed to, which may move it). A function that
wraps a model it was given (`model = nn.DataParallel(model)` on a parameter) is not reported:
its caller built the model and may have moved it.

## Why is this bad?
DataParallel requires the module's parameters and buffers on `device_ids[0]` (by
default `cuda:0`) and checks it on every forward: `module must have its parameters
and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cuda:1`
(or `cpu`).

## How to fix
Move the model to the first device in `device_ids` before the first call:
`model.to(f"cuda:{device_ids[0]}")`, or `nn.DataParallel(model, device_ids=[1, 2]).to("cuda:1")`.
"""

from __future__ import annotations

import ast
import re

from dpcheck.analysis.dataflow import keyword, passed_values
from dpcheck.analysis.placement import HOLDS_WEIGHTS, UNPLACED, places_itself
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts, target_text
from dpcheck.analysis.torch_api import MOVE_METHODS
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule

_INDEX = re.compile(r"^cuda:(\d+)$")


class ModelNotOnFirstDevice(Rule):
    code = "DP704"
    name = "model-not-on-first-device"
    severity = Severity.ERROR
    not_confirmable = TRAINING_SCRIPT
    summary = "The wrapped model must live on device_ids[0] when DataParallel runs"
    fix_hint = "Move the model to f'cuda:{device_ids[0]}' before calling the wrapper"
    bad_example = """
        net = Net().to("cuda:1")
        model = nn.DataParallel(net, device_ids=[0, 1])
    """
    good_example = """
        net = Net().to("cuda:0")
        model = nn.DataParallel(net, device_ids=[0, 1])
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in facts.dp_calls:
            if facts.source_of(call).requires:
                continue  # a class that may not be a DataParallel: too little to go on
            first = _first_device(call)
            inner = call.args[0] if call.args else None
            if inner is None:
                continue
            moves = list(_moves_in(inner))
            scope = facts.scope_of(call)
            if isinstance(inner, ast.Name):
                for node in ast.walk(scope):
                    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == inner.id
                                                            for t in node.targets):
                        moves += list(_moves_in(node.value))
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                            and node.func.attr in MOVE_METHODS and isinstance(node.func.value, ast.Name) \
                            and node.func.value.id == inner.id:
                        moves.append(node)
            # The wrapper itself moved: `DataParallel(net).cuda()` / `.to(device)`, here or later.
            parent = facts.parent(call)
            if isinstance(parent, ast.Attribute) and parent.attr in MOVE_METHODS:
                grandparent = facts.parent(parent)
                if isinstance(grandparent, ast.Call) and grandparent.func is parent:  # not `f(DP(net).to)`
                    moves.append(grandparent)
            holders = [w for w in facts.wraps if w.call is call]
            for node in ctx.nodes(ast.Call):
                if isinstance(node.func, ast.Attribute) and node.func.attr in MOVE_METHODS \
                        and any(target_text(node.func.value) == w.name for w in holders) \
                        and facts.wrap_for(node.func.value) in holders:
                    moves.append(node)
            for move in moves:
                index = _target_index(move)
                if index is not None and first is not None and index != first:
                    yield self.violation(move, f"The model goes to cuda:{index} but DataParallel's "
                                         f"device_ids[0] is {first}: forward fails with `module must have "
                                         f"its parameters and buffers on device cuda:{first}`")
            if not moves and _built_here(inner, call, scope, ctx) and not _handed_on(inner, call, holders, scope, facts):
                # A class of another file may move itself in its constructor: the index settles it.
                placed = [frozenset({f"{UNPLACED}:{name}"}) for name in _classes_elsewhere(inner, call, scope, ctx)]
                # A class that only holds the moved model it is handed is on the GPU with it.
                holder = _holder_of_placed(inner, call, scope, ctx)
                if holder is not None:
                    placed.append(frozenset({f"{HOLDS_WEIGHTS}:{holder}"}))
                yield self.violation(call, "The wrapped model is never moved to a GPU in this function: "
                                     "DataParallel needs it on device_ids[0] before the first call",
                                     severity=Severity.WARNING, requires=tuple(placed))


# Calls on a model that do not move it (anything else may: `model.initialize(opt)`).
_NON_MOVING = frozenset({"eval", "train", "parameters", "named_parameters", "modules", "named_modules",
                         "children", "state_dict", "load_state_dict", "apply", "zero_grad", "requires_grad_",
                         "register_forward_hook", "register_buffer", "float", "half", "double", "module", "compile"})


def _handed_on(inner, call, holders, scope, facts) -> bool:
    """Is the model (or its wrapper) handed to code that may move it: returned, stored on an object,
    passed to a call, or given a method call that is not known to leave it in place?"""
    names = {w.name for w in holders}
    if isinstance(inner, ast.Name):
        names.add(inner.id)
    for node in ast.walk(scope):
        if isinstance(node, ast.Return) and node.value is not None and (
                target_text(node.value) in names or node.value is call):
            return True
        if isinstance(node, ast.Call) and node is not call:
            args = [*node.args, *(k.value for k in node.keywords)]
            if any(target_text(a) in names for a in args):
                return True
            # (a method the wrapper lacks raises instead: DP701)
            if isinstance(node.func, ast.Attribute) and isinstance(inner, ast.Name) \
                    and target_text(node.func.value) == inner.id and node.func.attr not in _NON_MOVING:
                return True
        if isinstance(node, ast.Assign) and (target_text(node.value) in names or node.value is call) \
                and any(isinstance(t, ast.Attribute) for t in node.targets):
            return True
    return any(w.scope is not scope for w in holders)


def _first_device(call) -> int | None:
    ids = keyword(call, "device_ids")
    if ids is None and len(call.args) > 1:
        ids = call.args[1]
    if ids is None:
        return 0
    if isinstance(ids, (ast.List, ast.Tuple)) and ids.elts:
        first = ids.elts[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, int):
            return first.value
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            match = _INDEX.match(first.value)
            return int(match.group(1)) if match else None
    return None


def _moves_in(node):
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in MOVE_METHODS:
            yield sub


def _target_index(move) -> int | None:
    if not move.args:
        device = keyword(move, "device")
        if device is None:
            return 0 if move.func.attr == "cuda" else None
    else:
        device = move.args[0]
    if isinstance(device, ast.Constant):
        if isinstance(device.value, int) and not isinstance(device.value, bool):
            return device.value
        if isinstance(device.value, str):
            match = _INDEX.match(device.value)
            if match:
                return int(match.group(1))
            return 0 if device.value == "cuda" else None
    return None


def _constructions(inner, call, scope) -> list:
    """The values the wrapped model is built from (the wrap rebinding the name builds none)."""
    return [inner] if isinstance(inner, ast.Call) else [
        n.value for n in ast.walk(scope) if isinstance(n, ast.Assign) and isinstance(inner, ast.Name)
        and n.value is not call and any(isinstance(t, ast.Name) and t.id == inner.id for t in n.targets)]


def _holder_of_placed(inner, call, scope, ctx) -> str | None:
    """The class the wrapped model is built from, where it is built once, from arguments one of
    which is a model moved to a device (`LossWrapper(model, opt)` after `model = build().cuda()`)
    and none a model built here and never moved (`LossWrapper(Net(), opt)`). Whether the class
    holds weights of its own besides is the index's to say (`holds_weights:<class>`)."""
    values = _constructions(inner, call, scope)
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return None
    name = ctx.resolve(values[0].func)
    if not name or not name.rsplit(".", 1)[-1][:1].isupper():
        return None
    moved = False
    for arg in passed_values(values[0]):
        if isinstance(arg, ast.Starred):
            return None
        builds = [arg] if isinstance(arg, ast.Call) else _constructions(arg, None, scope)
        if any(any(True for _ in _moves_in(value)) for value in builds) or (isinstance(arg, ast.Name) and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MOVE_METHODS
                and isinstance(n.func.value, ast.Name) and n.func.value.id == arg.id for n in ast.walk(scope))):
            moved = True
        elif any(isinstance(value, ast.Call) and (ctx.resolve(value.func) or "").rsplit(".", 1)[-1][:1].isupper()
                 for value in builds):
            return None  # a model (or another object) built here and never moved
    return name if moved else None


def _classes_elsewhere(inner, call, scope, ctx) -> list[str]:
    """Dotted names of the classes the model is built from that this file does not define."""
    names = []
    for value in _constructions(inner, call, scope):
        name = ctx.resolve(value.func) if isinstance(value, ast.Call) else None
        if name and name.rsplit(".", 1)[-1] not in ctx.classes:
            names.append(name)
    return names


def _built_here(inner, call, scope, ctx) -> bool:
    """The wrapped model is constructed in this scope (so we can see all its moves), and neither
    its class's constructor nor a builder function of this file moves it. The wrap rebinding the
    name (`model = nn.DataParallel(model)`) builds no model: a function that only does that wraps
    a model it was given (a parameter), which its caller built and may have moved."""
    values = _constructions(inner, call, scope)
    if not values:
        return False
    for value in values:
        if not isinstance(value, ast.Call):
            return False
        name = (ctx.resolve(value.func) or "").rsplit(".", 1)[-1]
        if isinstance(value.func, ast.Attribute) and not name[:1].isupper():
            return False  # `self.train()`, `obj.build()`: an existing object, or one built elsewhere
        if isinstance(value.func, ast.Name) and value.func.id == "getattr":
            return False  # `getattr(self, "net" + name)`: an existing module, built (and moved) elsewhere
        builder = next((n for n in ctx.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and isinstance(value.func, ast.Name) and n.name == value.func.id), None)
        if builder is not None and any(isinstance(n, ast.Attribute) and n.attr in MOVE_METHODS
                                       for n in ast.walk(builder)):
            return False  # a builder of this file that moves the model
        info = ctx.classes.get(name)
        if info is not None and (places_itself(info, ctx) or any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MOVE_METHODS
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" for n in ast.walk(info.node))):
            return False
    return True
