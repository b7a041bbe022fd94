"""
## What it does
Flags a call of an `nn.DataParallel` wrapper that passes an `nn.Module` holding weights as an
argument: a construction (`model(x, Mapping().cuda())`), a local name bound to one, or an
attribute of `self` that every store in the class binds to one (GLEAN's solver calls
`self.generator(lr, self.mapping, self.synthesis)`, the pretrained StyleGAN nets it built in
`__init__`), also after `.cuda()`, `.to(device)`, `.eval()` or `.train()`, which return the module.
Modules without parameters or buffers of their own (`nn.ReLU()`, a loss module) are left out: every
replica can share them.

## Why is this bad?
DataParallel's scatter splits tensors and walks lists, tuples and dicts; any other object is
handed, by reference, to every replica (`scatter` "duplicates references to objects that are not
tensors"). Only the wrapped module is replicated onto each device: a module passed as an argument
is one object whose parameters stay where they were moved. The replica on the second GPU calls it
on its chunk and raises `Expected all tensors to be on the same device`; where forward moves the
chunk to the module's device instead, every replica runs that part on the first GPU, and the
threads share the module's gradients and any state it updates (BatchNorm statistics).

## How to fix
Make the module a child of the wrapped model (`self.mapping = mapping` in its `__init__`), so that
DataParallel replicates it with the rest, or call it outside the wrapper and pass its output.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.placement import HOLDS_WEIGHTS
from dpcheck.analysis.scripts import (
    SELF_RETURNING,
    WRAPPED_ATTRIBUTE_CONDITION,
    mentions_dataparallel,
    script_facts,
)
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule

# How many names to follow back from an argument to the value it was bound to.
_FOLLOW_STEPS = 3


class ModuleObjectArgument(Rule):
    code = "DP508"
    name = "module-object-argument"
    severity = Severity.ERROR
    # The harness runs a model's forward on example inputs it builds, not the script's call.
    not_confirmable = TRAINING_SCRIPT
    summary = "An nn.Module passed to a DataParallel model reaches every replica as the same object on one device"
    fix_hint = "Make the module a child of the wrapped model, or call it outside the wrapper and pass its output"
    bad_example = """
        class Generator(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x, mapping):
                return self.fc(mapping(x))

        model = nn.DataParallel(Generator()).cuda()
        mapping = nn.Linear(8, 8).cuda()
        out = model(torch.randn(16, 8).cuda(), mapping)
    """
    good_example = """
        class Generator(nn.Module):
            def __init__(self, mapping):
                super().__init__()
                self.fc = nn.Linear(8, 8)
                self.mapping = mapping

            def forward(self, x):
                return self.fc(self.mapping(x))

        model = nn.DataParallel(Generator(nn.Linear(8, 8))).cuda()
        out = model(torch.randn(16, 8).cuda())
    """

    def check_file(self, ctx):
        for call, wrapped in _wrapper_calls(ctx):
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                found = _module_object(arg, call, ctx, _FOLLOW_STEPS)
                if found is None:
                    continue
                why, requires = found
                yield self.violation(arg, f"{why} passed to the DataParallel model: scatter hands a module, as any "
                                     "object other than a tensor, list, tuple or dict, to every replica by reference, "
                                     "so the replicas on other GPUs call the one copy whose weights sit on the device "
                                     "it was moved to (a device mismatch)", requires=wrapped + requires)


def _wrapper_calls(ctx):
    """(call, the conditions under which it calls a stock DataParallel wrapper) for each call with
    arguments of a wrapper this file builds or is handed, and of `self.<attr>` in a class that is
    surely not a module (a solver or trainer object) where a script of another file may store a
    wrapper in that attribute (`trainer.generator = nn.DataParallel(trainer.generator)`). In a
    module, `self.<layer>(x, self.<other>)` calls a child, not a wrapper."""
    facts = script_facts(ctx) if mentions_dataparallel(ctx) else None
    seen = set()
    if facts is not None:
        for call in ctx.nodes(ast.Call):
            if not (call.args or call.keywords):
                continue
            wrap = facts.called_wrap(call)
            if wrap is None:
                continue
            seen.add(id(call))
            if "scatter" in wrap.source.note:
                continue  # a wrapper whose own scatter decides
            # A DataParallel subclass of another file: only where it keeps the stock scatter.
            yield call, wrap.requires + wrap.keeps_stock("scatter")
    for name, info in ctx.classes.items():
        if any(ctx.class_is_module(name)):
            continue
        for call in ctx.tree_index.nodes_within(info.node, ast.Call):
            func = call.func
            if id(call) not in seen and (call.args or call.keywords) and isinstance(func, ast.Attribute) \
                    and isinstance(func.value, ast.Name) and func.value.id == "self":
                yield call, (frozenset({f"{WRAPPED_ATTRIBUTE_CONDITION}{func.attr}@{ctx.module}"}),)


def _module_object(node, at, ctx, steps):
    """(why, conditions) when ``node``, read at ``at``, holds an nn.Module with weights of its own,
    or None when the file does not show one."""
    shown = node
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in SELF_RETURNING:
        node = node.func.value  # `mapping.cuda()`, `net.eval()`: the same module
    if isinstance(node, ast.Call):
        built = _construction(node, ctx)
        return (f"`{_short(shown)}` (an nn.Module)", built) if built is not None else None
    if steps <= 0:
        return None
    if isinstance(node, ast.Name):
        binding = reaching_assignment(ctx, node.id, at, module_fallback=True)
        if binding is None:
            return None
        found = _module_object(binding.value, binding.value, ctx, steps - 1)
        return (f"`{node.id}`, bound to {found[0]},", found[1]) if found is not None else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        built = _self_module(node.attr, at, ctx)
        if built is not None:
            value, requires = built
            return f"`self.{node.attr}` (an nn.Module, `{_short(value)}`)", requires
    return None


def _construction(call: ast.Call, ctx) -> tuple[frozenset[str], ...] | None:
    """The conditions under which ``call`` builds an nn.Module that holds weights of its own (the
    class is a module, for one of another file, and may hold a parameter or buffer), or None."""
    is_module, requires = ctx.callee_module_status(call)
    name = ctx.resolve(call.func)
    if not name or not (is_module or requires):
        return None
    conditions = (frozenset({f"{HOLDS_WEIGHTS}:{name}"}),)
    return conditions + ((frozenset(requires),) if requires and not is_module else ())


def _self_module(attr: str, at, ctx):
    """(the construction, conditions) where every store of ``self.<attr>`` in the class around ``at``
    builds one nn.Module class with weights (a `None` placeholder aside); else None."""
    cls = ctx.enclosing(at, ast.ClassDef)
    if cls is None:
        return None
    built = None
    info = ctx.classes.get(cls.name)
    # The class and its bases of this file (GLEAN's trainer calls what its base's `__init__` built).
    classes = [c.node for c in ctx.in_file_mro(info)] if info is not None and info.node is cls else [cls]
    for node in (n for c in classes for n in ast.walk(c)):
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Attribute) \
                and node.target.attr == attr:
            return None
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            stored = [t for t in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target])
                      if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
                      and t.attr == attr]
            if not stored:
                continue
            value = node.value
            if stored[0] is not target:
                return None  # unpacked from a tuple: what it holds is not shown
            if isinstance(value, ast.Constant) and value.value is None:
                continue
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                    and value.func.attr in SELF_RETURNING:
                value = value.func.value
            requires = _construction(value, ctx) if isinstance(value, ast.Call) else None
            if requires is None or built is not None and ast.unparse(built[0].func) != ast.unparse(value.func):
                return None
            built = (value, requires)
    return built


def _short(node) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."
