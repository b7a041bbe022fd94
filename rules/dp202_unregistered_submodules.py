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

## How to fix
Use `nn.ModuleList([...])`, `nn.ModuleDict({...})`, `nn.ParameterList([...])` or
`nn.ParameterDict({...})`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.torch_api import is_torch_nn_class, parameter_free
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
            if _registered_afterwards(fn, name) or _only_weightless(model, value):
                continue
            what = "Parameters" if holds == {"parameter"} else "modules"
            container = "nn.ParameterList" if what == "Parameters" else "nn.ModuleList"
            requires = () if holds else (frozenset(facts.requires),)
            latent = _weighted_only_on_a_branch(model, fn, name)
            yield self.violation(target, f"`self.{name}` holds {what} in a plain Python container: "
                                 "they are not registered, so `.to()`, `parameters()`, `state_dict()` "
                                 f"and DataParallel replication all miss them (use {container})"
                                 + ("; only in configurations that take the branch building layers with "
                                    "weights (the other branch adds weightless placeholders)" if latent else ""),
                                 requires=requires, fix=_registering_fix(model, fn, target, value, what),
                                 subject=Subject(attr=name), severity=Severity.WARNING if latent else None)

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


def _registered_afterwards(fn, name) -> bool:
    """`for i, layer in enumerate(self.layers): self.add_module(str(i), layer)`."""
    return any(isinstance(c.func, ast.Attribute) and c.func.attr in ("add_module", "register_module")
               and fn.is_self(c.func.value) for c in fn.nodes(ast.Call)) and any(
        fn.self_attr(n) == name for n in fn.nodes(ast.Attribute))


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
