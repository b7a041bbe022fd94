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

## How to fix
Use `nn.ModuleList([...])`, `nn.ModuleDict({...})`, `nn.ParameterList([...])` or
`nn.ParameterDict({...})`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.outputs import parameter_free
from dpcheck.analysis.torch_api import is_torch_nn_class
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class UnregisteredSubmodules(Rule):
    code = "DP202"
    name = "unregistered-submodules"
    severity = Severity.ERROR
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
            yield self.violation(target, f"`self.{name}` holds {what} in a plain Python container: "
                                 "they are not registered, so `.to()`, `parameters()`, `state_dict()` "
                                 f"and DataParallel replication all miss them (use {container})",
                                 requires=requires)


def _registered_afterwards(fn, name) -> bool:
    """`for i, layer in enumerate(self.layers): self.add_module(str(i), layer)`."""
    return any(isinstance(c.func, ast.Attribute) and c.func.attr in ("add_module", "register_module")
               and fn.is_self(c.func.value) for c in fn.nodes(ast.Call)) and any(
        fn.self_attr(n) == name for n in fn.nodes(ast.Attribute))


def _only_weightless(model, value) -> bool:
    """A dict of loss functions or activations: nothing to move, train or save."""
    names = [model.ctx.resolve(c.func) or "" for c in ast.walk(value) if isinstance(c, ast.Call)]
    modules = [n for n in names if is_torch_nn_class(n) or n.endswith("Loss")]
    return bool(modules) and len(modules) == len([n for n in names if n[:1] != "" and n.rsplit(".", 1)[-1][:1].isupper()]) \
        and all(parameter_free(n) for n in modules)
