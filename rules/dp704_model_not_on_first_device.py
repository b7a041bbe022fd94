"""
## What it does
In training scripts, flags a model moved to a GPU other than `device_ids[0]`
(`.to("cuda:1")`, `.cuda(1)`) before or after wrapping it in `nn.DataParallel`, and
(as a warning) a model built in the same function that is never moved to a GPU at all:
not before wrapping, not through the wrapper later in the file, not by its own class
(`self.to(device)` or `self.netG.to(device)` in `__init__`, in this file or another scanned
one), not by a builder function of another scanned file whose every return hands it back moved
(`return Bicubic(k).cuda()`), and not by code it is handed to (a builder that returns
it, a parameter, a function or method it is passed to, which may move it). A function that
wraps a model it was given (`model = nn.DataParallel(model)` on a parameter) is not reported:
its caller built the model and may have moved it. Nor is a wrapper that is never called: one
bound to a function's local name and used only for what it holds (`.module`) and by methods that run no forward
(`load_state_dict`, a wrapper built to load `module.`-prefixed keys and unwrapped at once). A
script's module-level name used so, and read in none of the file's functions, is reported only
where another scanned file imports it or its module (which may call it).

Also (a warning) a model moved to the first GPU of a configured list (`ids[0]`,
`torch.device('cuda:{}'.format(opt['gpuid'][0]))`, through a name such as `self.device`, and for a
`self.<model>` in any method of the class) and wrapped with the default device_ids: the wrapper
then scatters from cuda:0, which holds the model only when the list starts at 0. A list built
from `range(n)` in the function counts from 0.

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

from dpcheck.analysis.dataflow import BUILT_OUTSIDE_CONDITION, keyword, passed_values
from dpcheck.analysis.placement import HOLDS_WEIGHTS, UNPLACED, places_itself
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts, target_text
from dpcheck.analysis.torch_api import FUNCTION_DEFS, MOVE_METHODS
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
            if _never_called(call, holders, scope, facts):
                if not isinstance(scope, ast.Module):
                    continue  # no forward through the wrapper, so no scatter to device_ids[0]
                # A module-level name may still be imported and called by another file.
                imported = (frozenset({f"{BUILT_OUTSIDE_CONDITION}{ctx.module}.{holders[0].name}"}),)
            else:
                imported = ()
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
                                         f"its parameters and buffers on device cuda:{first}`", requires=imported)
            configured = _configured_first_device(inner, call, scope, ctx) if _default_ids(call) else None
            if configured is not None:
                yield self.violation(call, f"The model goes to the first GPU of `{configured}`, but this "
                                     "DataParallel takes its default device_ids (every visible GPU, from "
                                     f"cuda:0): unless `{configured}` starts at 0, forward fails with `module "
                                     "must have its parameters and buffers on device cuda:0`; pass that list "
                                     "as device_ids", severity=Severity.WARNING, requires=imported)
            if not moves and _built_here(inner, call, scope, ctx) and not _handed_on(inner, call, holders, scope, facts):
                # A class of another file may move itself in its constructor: the index settles it.
                placed = [frozenset({f"{UNPLACED}:{name}"}) for name in _classes_elsewhere(inner, call, scope, ctx)]
                # A class that only holds the moved model it is handed is on the GPU with it.
                holder = _holder_of_placed(inner, call, scope, ctx)
                if holder is not None:
                    placed.append(frozenset({f"{HOLDS_WEIGHTS}:{holder}"}))
                yield self.violation(call, "The wrapped model is never moved to a GPU in this function: "
                                     "DataParallel needs it on device_ids[0] before the first call",
                                     severity=Severity.WARNING, requires=tuple(placed) + imported)


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


def _never_called(call, holders, scope, facts) -> bool:
    """`m = nn.DataParallel(m); m.load_state_dict(sd); self.v = m.module.v`: the wrapper is bound to
    a local name and only used for what it holds (`.module`) and by methods that run no forward
    (`load_state_dict`, `eval`, `.cuda()`): never called, returned, stored or passed on. Only a
    call of the wrapper scatters to device_ids[0]; a wrapper built to load `module.`-prefixed
    keys and unwrapped at once runs nothing there. Loads before the wrap count when a loop
    around it can reach them again. Only a function's local: a module-level or global name may
    be called from anywhere; at a module's top level, a name no function, class or lambda of the file
    reads (the caller asks whether another file imports it)."""
    assign = facts.parent(call)
    if isinstance(scope, ast.Module):
        target = assign.targets[0] if isinstance(assign, ast.Assign) and len(assign.targets) == 1 else None
        if not isinstance(target, ast.Name) or any(
                isinstance(n, ast.Name) and n.id == target.id or isinstance(n, ast.Global) and target.id in n.names
                for body in ast.walk(scope) if isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                                 ast.ClassDef))
                for n in ast.walk(body)):
            return False
    elif not isinstance(scope, FUNCTION_DEFS) or any(
            isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(scope)):
        return False
    if not (holders and isinstance(assign, ast.Assign) and assign.value is call and len(assign.targets) == 1
            and isinstance(assign.targets[0], ast.Name) and all(w.name == assign.targets[0].id and w.scope is scope
                                                               for w in holders)):
        return False
    name = assign.targets[0].id
    inside = {id(n) for n in ast.walk(call)}
    loops = [n for n in ast.walk(scope) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
             and any(sub is assign for sub in ast.walk(n))]
    looped = {id(n) for loop in loops for n in ast.walk(loop)}
    for node in ast.walk(scope):
        if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)) \
                or id(node) in inside or (node.lineno < assign.lineno and id(node) not in looped):
            continue
        parent = facts.parent(node)
        if not (isinstance(parent, ast.Attribute) and parent.value is node):
            return False
        if parent.attr == "module":
            continue
        method = facts.parent(parent)
        if not (parent.attr in _NON_MOVING or parent.attr in MOVE_METHODS) \
                or not (isinstance(method, ast.Call) and method.func is parent):
            return False
    return True


def _default_ids(call) -> bool:
    return keyword(call, "device_ids") is None and len(call.args) < 2


def _configured_first_device(inner, call, scope, ctx) -> str | None:
    """`self.device = torch.device('cuda:{}'.format(opt['gpuid'][0]))` ... `self.net = Net.to(self.device)`
    ... `nn.DataParallel(self.net)`: the text of the configured GPU list (`opt['gpuid']`) whose first
    element the wrapped model was moved to, where the wrap leaves device_ids to its default. The
    model is followed through its assignments and move calls in the wrap's function, or, for a
    `self.<x>` model, in every method of the class; a device name likewise. A list built here from
    `range(...)` starts at 0 and is no configured list."""
    text = target_text(inner)
    if text is None:
        return None
    owner = ctx.enclosing(scope, ast.ClassDef) if text.startswith("self.") else None
    region = owner if owner is not None else scope
    for move in _moves_of(text, region, call):
        device = move.args[0] if move.args else keyword(move, "device")
        found = _first_of_list(device, region, scope, depth=0)
        if found is not None:
            return found
    return None


def _moves_of(text, region, call):
    """Move calls on the model named ``text`` in ``region``: in the values assigned to it
    (`self.net = Net.to(dev)`) and called on it (`self.net.cuda(dev)`)."""
    for node in ast.walk(region):
        if isinstance(node, ast.Assign) and node.value is not call \
                and any(target_text(t) == text for t in node.targets):
            yield from _moves_in(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MOVE_METHODS and target_text(node.func.value) == text:
            yield node


def _first_of_list(device, region, scope, depth) -> str | None:
    """The list whose first element ``device`` names: `ids[0]`, `torch.device('cuda', ids[0])`,
    `torch.device('cuda:{}'.format(ids[0]))`, `f'cuda:{ids[0]}'`, `'cuda:%d' % ids[0]`, or a name
    (`self.device`) assigned one of these."""
    if device is None or depth > 4:
        return None
    if isinstance(device, ast.Subscript) and isinstance(device.slice, ast.Constant) and device.slice.value == 0 \
            and not isinstance(device.value, (ast.List, ast.Tuple)):
        listed = target_text(device.value) or ast.unparse(device.value)
        return None if _counts_from_zero(device.value, scope) else listed
    if isinstance(device, ast.Call) and isinstance(device.func, ast.Attribute) and device.func.attr == "device" \
            and device.args:
        return _first_of_list(device.args[-1] if len(device.args) == 2 else device.args[0], region, scope, depth + 1)
    if isinstance(device, ast.Call) and isinstance(device.func, ast.Attribute) and device.func.attr == "format" \
            and isinstance(device.func.value, ast.Constant) and device.func.value.value in ("cuda:{}", "cuda:{0}") \
            and len(device.args) == 1:
        return _first_of_list(device.args[0], region, scope, depth + 1)
    if isinstance(device, ast.JoinedStr) and len(device.values) == 2 and isinstance(device.values[0], ast.Constant) \
            and device.values[0].value == "cuda:" and isinstance(device.values[1], ast.FormattedValue):
        return _first_of_list(device.values[1].value, region, scope, depth + 1)
    if isinstance(device, ast.BinOp) and isinstance(device.op, ast.Mod) and isinstance(device.left, ast.Constant) \
            and device.left.value == "cuda:%d":
        return _first_of_list(device.right, region, scope, depth + 1)
    text = target_text(device) if isinstance(device, (ast.Name, ast.Attribute)) else None
    if text is not None:
        where = region if text.startswith("self.") else scope
        for node in ast.walk(where):
            if isinstance(node, ast.Assign) and any(target_text(t) == text for t in node.targets):
                values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
                for value in values:
                    found = _first_of_list(value, region, scope, depth + 1)
                    if found is not None:
                        return found
    return None


def _counts_from_zero(listed, scope) -> bool:
    """`ids = list(range(n))` in this function: a list that starts at 0 (so do literal lists, which
    `device_ids` would name literally too)."""
    text = target_text(listed)
    if text is None:
        return False
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and any(target_text(t) == text for t in node.targets):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "list" \
                    and value.args:
                value = value.args[0]
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "range" \
                    and len(value.args) == 1:
                return True
            if isinstance(value, (ast.List, ast.Tuple)):
                return True
    return False


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
        builder = next((n for n in ctx.tree.body if isinstance(n, FUNCTION_DEFS)
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
