"""
## What it does
Flags modules or Parameters held in plain Python lists, tuples or dicts on `self`:
`self.layers = [nn.Linear(8, 8) for _ in range(4)]`, `self.heads = {"a": Head()}`,
`self.weights = [nn.Parameter(torch.randn(4))]`, or a plain list filled with
`self.blocks.append(Block())` in `__init__`.

## Why is this bad?
`nn.Module` only sees submodules and Parameters assigned directly or held in
`nn.ModuleList`, `nn.ModuleDict`, `nn.ParameterList` or `nn.ParameterDict`. Those in
plain containers are invisible: `.to()`/`.cuda()` do not move them, `parameters()`
does not return them (so the optimizer never trains them), `state_dict()` does not
save them, and DataParallel does not replicate them. Every replica calls the single
original copy on its original device: `mat1 is on cuda:1, different from other tensors
on cuda:0`.

A container that gets layers with weights only in one arm of an `if` whose other arm adds
weightless placeholders (`nn.Sequential()`, `nn.Identity()`) is a warning: it holds weights
only in the configurations that take that arm.

A list whose modules the same method also registers through a torch container built from it
(`self.path_module_list = nn.ModuleList(self.paths)`, pytorch-semseg's `pyramidPooling`) is not
reported where forward never reads the list itself, only the container: every replica runs its
own copies. Where forward reads the list, each replica still calls the original's modules.

Only weights make it a hazard: a container whose items (its literal's items, what
`.append`/`.insert` and item stores put in it) are all weightless torch layers, or classes of
this file whose `__init__` builds no Parameter, buffer or layer with weights, is not reported
(every replica can call the one shared object). Where such a class of this file builds only
objects the file cannot trace (a loss class looked up in a registry), it is a warning. A class
of another file is presumed to hold weights.

## How to fix
Use `nn.ModuleList([...])`, `nn.ModuleDict({...})`, `nn.ParameterList([...])` or
`nn.ParameterDict({...})`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import read_in_forward
from dpcheck.analysis.model_class import ITEM
from dpcheck.analysis.torch_api import (
    MODULE_BASES,
    MODULE_CONTAINERS,
    PARAMETER_CTORS,
    is_torch_nn_class,
    parameter_free,
)
from dpcheck.findings import Applicability, Severity, Subject
from dpcheck.findings import ObservationKind as K
from dpcheck.rule import Rule


class UnregisteredSubmodules(Rule):
    code = "DP202"
    name = "unregistered-submodules"
    severity = Severity.ERROR
    confirms = frozenset({K.DEVICE_MISMATCH, K.VALUES_DIFFER, K.GRADS_DIFFER})
    summary = "Modules or Parameters in a plain list/tuple/dict are not registered, moved or replicated"
    fix_hint = "Wrap the container in nn.ModuleList / nn.ModuleDict / nn.ParameterList / nn.ParameterDict"
    bad_example = """
        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = [nn.Linear(8, 8) for _ in range(4)]

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
    """
    good_example = """
        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])
                self.sizes = [8, 8, 8]

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
    """

    def check_class(self, model):
        for name, facts in model.attrs.items():
            if "container" not in facts.kinds or facts.registered:
                continue
            holds = facts.element_kinds & {"module", "parameter"}
            maybe = "maybe_module" in facts.element_kinds and facts.requires
            if not holds and not maybe:
                continue
            found = next(((t, v, fn) for t, v, fn in facts.assignments
                          if model.classify(v, fn)[0] == "container"), None)
            if found is None:
                continue
            target, value, fn = found
            if _registered_afterwards(fn, name) or _registered_in_container(model, fn, name) \
                    or _only_weightless(model, value):
                continue
            weights = _element_weights(model, name, facts)
            if weights == _WEIGHTLESS:
                continue  # nothing to move, train, save or replicate
            what = "Parameters" if holds == {"parameter"} else "modules"
            container = "nn.ParameterList" if what == "Parameters" else "nn.ModuleList"
            requires = () if holds else (frozenset(facts.requires),)
            latent = _weighted_only_on_a_branch(model, fn, name)
            yield self.violation(target, f"`self.{name}` holds {what} in a plain Python container: "
                                 "they are not registered, so `.to()`, `parameters()`, `state_dict()` "
                                 f"and DataParallel replication all miss them (use {container})"
                                 + ("; only in configurations that take the branch building layers with "
                                    "weights (the other branch adds weightless placeholders)" if latent else "")
                                 + ("; their classes build no Parameter or layer with weights that this file "
                                    "shows, only objects it cannot trace: a hazard only if those hold weights"
                                    if weights == _UNTRACED else ""),
                                 requires=requires, fix=_registering_fix(model, fn, target, value, what),
                                 subject=Subject(attr=name),
                                 severity=Severity.WARNING if latent or weights == _UNTRACED else None)

    def fix(self, finding, editor):
        import libcst as cst

        target = editor.node  # `self.<name>` in `self.<name> = [...]`
        assign = editor.enclosing(target, cst.Assign)
        wrapper = finding.fix.get("container")
        if assign is None or len(assign.targets) != 1 or not wrapper:
            return
        call = cst.parse_expression(f"{wrapper}(None)")
        call = call.with_changes(args=[call.args[0].with_changes(value=assign.value)])
        editor.replace(assign.value, call)
        if finding.fix.get("import"):
            editor.add_import(finding.fix.get("import"))


# What the modules in a plain container hold, as far as the file shows (``_element_weights``).
_WEIGHTED, _UNTRACED, _WEIGHTLESS = "weighted", "untraced", "weightless"
# How deep ``_class_weights`` follows the classes of this file that a class builds.
_WEIGHT_DEPTH = 3


def _element_weights(model, name, facts) -> str:
    """``_WEIGHTED`` where an item of `self.<name>` is a Parameter, a torch layer with weights or a
    class of another file (a module class is presumed to hold weights unless its code is read);
    ``_WEIGHTLESS`` where every item is a weightless torch layer or a class of this file whose
    `__init__` builds nothing with weights; ``_UNTRACED`` where such a class of this file builds
    only objects the file cannot trace (a loss class looked up in a registry) beside weightless ones."""
    items = [item for _, value, _ in facts.assignments for item in _literal_items(value)]
    for fn in model.all_methods:
        for call in fn.nodes(ast.Call):
            func = call.func
            if isinstance(func, ast.Attribute) and fn.self_attr(func.value) == name:
                if func.attr == "append" and len(call.args) == 1:
                    items.append(call.args[0])
                elif func.attr == "insert" and len(call.args) == 2:
                    items.append(call.args[1])
                elif func.attr in ("extend", "update", "__setitem__", "setdefault"):
                    return _WEIGHTED  # items the file does not spell out one by one
    items += [store.value for store in (model.self_stores.get(name + ITEM) or ())]
    if not items:
        return _WEIGHTED
    return _combined(_value_weights(model, item, 0) for item in items)


def _literal_items(value) -> list:
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return list(value.elts)
    if isinstance(value, ast.Dict):
        return list(value.values)
    if isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return [value.elt]
    if isinstance(value, ast.DictComp):
        return [value.value]
    return []


def _combined(weights) -> str:
    seen = set(weights)
    return _WEIGHTED if _WEIGHTED in seen else _UNTRACED if _UNTRACED in seen else _WEIGHTLESS


def _value_weights(model, value, depth: int) -> str:
    if not isinstance(value, ast.Call):
        return _WEIGHTED if isinstance(value, ast.Name) else _UNTRACED
    name = model.ctx.resolve(value.func) or ""
    if name in PARAMETER_CTORS:
        return _WEIGHTED
    if is_torch_nn_class(name):
        return _WEIGHTLESS if parameter_free(name) or _weightless_layer(model, value) else _WEIGHTED
    local = model.ctx.local_name(name)
    info = model.ctx.classes.get(local) if local else None
    if info is None or depth >= _WEIGHT_DEPTH:
        return _WEIGHTED if name and name[:1] != "." and name.rsplit(".", 1)[-1][:1].isupper() else _UNTRACED
    return _class_weights(model, info, depth + 1)


def _class_weights(model, info, depth: int) -> str:
    """What a module class of this file builds in `__init__` (its bases of this file included):
    Parameters, buffers, torch layers, classes; a base of another file may build more."""
    ctx = model.ctx
    # A base of another file, or a torch layer with weights (`class MyConv(nn.Conv2d)`), holds what
    # this `__init__` does not show.
    if any(ctx.local_name(base) is None and base not in MODULE_BASES
           and not (is_torch_nn_class(base) and parameter_free(base)) for base in info.bases):
        return _WEIGHTED
    weights = []
    for cls in ctx.in_file_mro(info):
        init = cls.methods.get("__init__")
        if init is None:
            continue
        for node in ast.walk(init):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("register_buffer", "register_parameter", "add_module", "register_module"):
                return _WEIGHTED
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                                   and t.value.id == "self" for t in node.targets):
                for part in ast.walk(node.value):
                    if isinstance(part, ast.Call) and not _tensor_or_plain(ctx.resolve(part.func) or ""):
                        weights.append(_value_weights(model, part, depth))
    return _combined(weights)


def _tensor_or_plain(name: str) -> bool:
    """A call whose result holds no weights: a tensor factory or conversion, a builtin."""
    return name.startswith("torch.") and not is_torch_nn_class(name) and name not in PARAMETER_CTORS \
        or name.startswith("builtins.") or name in ("len", "int", "float", "str", "dict", "list", "getattr")


def _registered_afterwards(fn, name) -> bool:
    """`for i, layer in enumerate(self.layers): self.add_module(str(i), layer)`."""
    return any(isinstance(c.func, ast.Attribute) and c.func.attr in ("add_module", "register_module")
               and fn.is_self(c.func.value) for c in fn.nodes(ast.Call)) and any(
        fn.self_attr(n) == name for n in fn.nodes(ast.Attribute))


def _registered_in_container(model, fn, name) -> bool:
    """`self.path_module_list = nn.ModuleList(self.paths)`: ``fn`` stores on `self` a torch container
    built from `self.<name>` (`nn.Sequential(*self.<name>)` too), and forward never reads `self.<name>`
    itself: the modules are registered, moved and replicated through the container, the only way
    forward reaches them."""
    resolve = model.ctx.resolve
    for call in fn.nodes(ast.Call):
        target = resolve(call.func) or ""
        if not (target.startswith("torch.nn.") and target.rpartition(".")[2] in MODULE_CONTAINERS):
            continue
        stored = fn.parent(call)
        if isinstance(stored, ast.Assign) and any(fn.self_attr(t) for t in stored.targets) and any(
                fn.self_attr(a.value if isinstance(a, ast.Starred) else a) == name for a in call.args):
            return not read_in_forward(model, name)
    return False


def _weighted_only_on_a_branch(model, fn, name) -> bool:
    """Every layer with weights goes into `self.<name>` in one arm of an `if` whose other arm
    appends a weightless placeholder (`nn.Identity()`, `nn.Sequential()`): the container holds
    weights only in the configurations that take that arm."""
    appends = [c for c in fn.nodes(ast.Call) if isinstance(c.func, ast.Attribute) and c.func.attr == "append"
               and fn.self_attr(c.func.value) == name and c.args]
    weighted = [c for c in appends if not _weightless_layer(model, c.args[0])]
    if not weighted or len(weighted) == len(appends):
        return False
    for call in weighted:
        branch = fn.enclosing(call, ast.If)
        if branch is None or not branch.orelse:
            return False
        other = [c for c in appends if any(c is n for s in branch.orelse for n in ast.walk(s))]
        if not other or not all(_weightless_layer(model, c.args[0]) for c in other):
            return False
    return True


def _weightless_layer(model, value) -> bool:
    """A torch.nn layer without weights, or an empty `nn.Sequential()` (an identity)."""
    name = model.ctx.resolve(value.func) if isinstance(value, ast.Call) else None
    if not (name and is_torch_nn_class(name)):
        return False
    empty_container = name.rsplit(".", 1)[-1] in ("Sequential", "ModuleList") and not value.args
    return empty_container or parameter_free(name)


def _only_weightless(model, value) -> bool:
    """A dict of loss functions or activations: nothing to move, train or save."""
    names = [model.ctx.resolve(c.func) or "" for c in ast.walk(value) if isinstance(c, ast.Call)]
    modules = [n for n in names if is_torch_nn_class(n) or n.endswith("Loss")]
    return bool(modules) and len(modules) == len([n for n in names if n[:1] != "" and n.rsplit(".", 1)[-1][:1].isupper()]) \
        and all(parameter_free(n) for n in modules)


def _registering_fix(model, fn, target, value, what):
    """Wrap the container in nn.ModuleList/ModuleDict/ParameterList/ParameterDict: safe when
    it is built in one assignment (a list literal or comprehension, or a dict with string
    keys); `nn` is spelled as the file spells it, or imported."""
    if not isinstance(fn.parent(target), ast.Assign) or len(fn.parent(target).targets) != 1:
        return None
    if isinstance(value, (ast.List, ast.ListComp, ast.Tuple)):
        kind = "List"
    elif isinstance(value, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                             for k in value.keys):
        kind = "Dict"
    else:
        return None
    wrapper = ("Parameter" if what == "Parameters" else "Module") + kind
    aliases = model.ctx.imports.aliases
    local = next((n for n, target_name in aliases.items() if target_name == "torch.nn"), None)
    extra = {}
    if local is None:
        local = "torch.nn" if aliases.get("torch") == "torch" else "nn"
        if local == "nn" and "nn" not in aliases:
            extra["import"] = "from torch import nn"
    return Rule.offer_fix(f"Register them: `{local}.{wrapper}(...)`", Applicability.SAFE,
                          container=f"{local}.{wrapper}", **extra)
