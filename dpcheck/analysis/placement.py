"""Which classes place themselves on a device when they are built, and which hold no weights of
their own.

A training module that holds its networks and moves them in `__init__` (`self.netG.to(
self.device_ids[0])`, `self.to(device)`, `self.cuda()`) is on a GPU once it is constructed, so a
script that wraps it without moving it is fine; so is what a builder function returns moved
(`def build_sampler(k): return Bicubic(k).cuda()`). Each file records its classes and top-level
functions that do (``FileResult.self_placing``), and the project index answers ``unplaced:<name>``:
no scanned class of that name moves itself or its submodules in its constructor, and no scanned
function of that name returns its module moved.

A module that builds no parameter, buffer or weighted layer of its own, only holds what it is handed
(`LossWrapper(model, opt)`: the model, and criteria that own no weights), is on the GPU once the
model handed to it is. Each file records its module classes whose constructor builds nothing with
weights (``FileResult.weightless``, with the classes it builds whose weights the index must still
look at), and the index answers ``holds_weights:<class>``: the class, a base of it or a class its
constructor builds may hold weights of its own (or is not scanned).
"""

from __future__ import annotations

import ast

from dpcheck.analysis.classes import ClassInfo
from dpcheck.analysis.context import FileContext
from dpcheck.analysis.tree import FunctionInfo
from dpcheck.analysis.torch_api import (
    MODULE_CONTAINERS,
    MOVE_METHODS,
    PARAMETER_CTORS,
    is_torch_nn_class,
    parameter_free,
)

UNPLACED = "unplaced"  # the condition's kind: `unplaced:<dotted class name>`
HOLDS_WEIGHTS = "holds_weights"  # the condition's kind: `holds_weights:<dotted class name>`


def places_itself(info: ClassInfo, ctx: FileContext) -> bool:
    """Does the class's `__init__` move the module or one of its submodules to a device
    (`self.to(device)`, `self.cuda()`, `self.netG.to(self.device_ids[0])`)?"""
    init = info.methods.get("__init__")
    if init is None:
        return False
    for node in ctx.tree_index.nodes_within(init, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in MOVE_METHODS:
            owner = node.func.value
            if isinstance(owner, ast.Attribute):
                owner = owner.value
            if isinstance(owner, ast.Name) and owner.id == "self":
                return True
    return False


def returns_placed(fn: FunctionInfo) -> bool:
    """Does every `return` of the function hand back a value moved to a device: a move call
    (`return Bicubic(k).cuda()`), or a local name bound only to such calls or moved by a statement
    (`net = Net(); net.to(device); return net`)? Returns of nested functions are theirs."""
    returns = list(fn.returns())
    names = [value for value in returns if not _moves(value)]
    if not returns or not all(isinstance(value, ast.Name) for value in names):
        return False  # (most functions: decided without reading their assignments)
    if not names:
        return True
    moved = {node.value.func.value.id for node in fn.nodes(ast.Expr)
             if _moves(node.value) and isinstance(node.value.func.value, ast.Name)}
    bound = fn.local_values
    return all(value.id in moved or bool(bound.get(value.id)) and all(_moves(v) for v in bound[value.id])
               for value in names)


def _moves(value) -> bool:
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVE_METHODS


def summarize_placement(ctx: FileContext, result) -> None:
    """Fill ``result.self_placing`` (qualified names of classes and top-level functions) for the
    project index; only files that call `.cuda(` or `.to(` somewhere read the constructors and functions."""
    text = ctx.source.text
    if ".cuda(" not in text and ".to(" not in text:
        return
    result.self_placing = sorted(
        [info.qualname for info in ctx.classes.values() if places_itself(info, ctx)]
        + [f"{ctx.module}.{name}" for name, fn in ctx.module_functions.items()
           if returns_placed(ctx.function(fn, None))])


# Calls in a constructor that build nothing with weights: builtins and standard-library helpers
# (`getattr(opt, ...)`, `copy.deepcopy(model)`: a copy of what it was handed), logging, paths.
_VALUE_CALLS = frozenset({"getattr", "hasattr", "isinstance", "setattr", "len", "int", "float", "str", "bool",
                          "list", "tuple", "dict", "set", "min", "max", "abs", "round", "sum", "range", "print",
                          "super", "enumerate", "zip", "sorted"})
_VALUE_ROOTS = frozenset({"copy", "os", "math", "logging", "warnings", "numpy", "json", "functools", "itertools",
                          "collections", "re", "random", "sys", "typing"})
# Methods of the module itself that a constructor calls without building anything.
_NEUTRAL_SELF_METHODS = frozenset({"add_module", "apply", "train", "eval", "requires_grad_", "register_forward_hook",
                                   "register_forward_pre_hook", "register_full_backward_hook", "to", "cuda"})
_REGISTERS_STATE = frozenset({"register_buffer", "register_parameter"})


def weightless_parts(info: ClassInfo, ctx: FileContext) -> list[str] | None:
    """None if the class's `__init__` may build a parameter, buffer or weighted layer itself;
    else the dotted names of the classes it builds there (other than torch's weightless ones:
    activations, losses, containers), whose own weights the index must still rule out. Storing
    what it is handed (`self.model = model`), reading options and copying arguments build nothing."""
    init = info.methods.get("__init__")
    if init is None:
        return []
    parts: list[str] = []
    for call in ctx.tree_index.nodes_within(init, ast.Call):
        func = call.func
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            if func.attr in _NEUTRAL_SELF_METHODS:
                continue
            return None  # a buffer, a parameter, or a method that may build layers
        if not isinstance(root, ast.Name):
            continue  # `super().__init__(...)`, a method of a call's result
        if isinstance(func, ast.Name) and func.id in _VALUE_CALLS and func.id not in ctx.module_functions:
            continue  # a builtin (resolved names carry the module for most of them)
        if root.id == "self" or (isinstance(func, ast.Attribute) and root.id not in ctx.imports.aliases):
            continue  # a method of something held or handed in (`self.model.eval()`, `opt.vocab.copy()`)
        name = ctx.resolve(func) or ""
        head, last = name.partition(".")[0], name.rsplit(".", 1)[-1]
        if name in PARAMETER_CTORS:
            return None
        if head == "torch":
            if is_torch_nn_class(name) and not (parameter_free(last) or last in MODULE_CONTAINERS):
                return None
            continue  # a weightless layer, a tensor, a function
        if name in _VALUE_CALLS or head in _VALUE_ROOTS:
            continue
        if last[:1].isupper():
            parts.append(name)  # a class: the index looks at its weights
            continue
        return None  # a builder function may return layers
    return parts


def summarize_weightless(ctx: FileContext, result) -> None:
    """Fill ``result.weightless`` (qualified class name -> the classes of other files it builds) for
    the project index: module classes with a forward of their own (what a script wraps, and the
    criteria such a class builds), and only where what the file itself shows holds no weights: a
    class of this file it builds or derives from must be weightless too (a decoder layer that
    builds this file's attention is left out, so a model library records few)."""
    if "Module" not in ctx.source.text and "nn." not in ctx.source.text:
        return
    found: dict[str, list[str]] = {}
    for name, info in ctx.classes.items():
        if "forward" not in info.methods:
            continue
        parts = weightless_parts(info, ctx)  # (most classes build a layer early: cheaper asked first)
        if parts is not None and any(ctx.class_is_module(name)):
            found[name] = [*info.bases, *parts]
    local = {info.qualname: name for name, info in ctx.classes.items()}
    changed = True
    while changed:  # drop a class that builds, or derives from, one of this file that holds weights
        changed = False
        for name, others in list(found.items()):
            if any(local.get(other, name) not in found for other in others):
                del found[name]
                changed = True
    # What is left of this file is settled here; the index follows the rest (and every base).
    result.weightless = {ctx.classes[name].qualname: sorted({p for p in parts[len(ctx.classes[name].bases):]
                                                               if p not in local})
                         for name, parts in found.items()}
