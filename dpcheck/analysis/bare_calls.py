"""Which classes the project only builds and calls outside any module: no replica runs them.

A loss the training script builds (`self.criterion = objective.RingLoss(...)` in a trainer,
`crit = GDL(3)` in a function) and calls on the gathered output of the wrapped model runs once,
on the main thread: whatever its forward does with the batch, DataParallel never replicates it.
That holds for an instance that never reaches a wrapper or a module: its binding is only called
(`crit(out, y)`), moved (`crit = crit.cuda()`, `crit.to(device)` as a statement) or read through
(`crit.t = 0.1`, `crit.parameters()`), never passed to a call, stored elsewhere, returned or
handed to a module's constructor; a second local name bound to it as it is (`loss_fn = lsr` on one
arm of an `if`) is read as the instance, its reads confined in turn. A module method that calls it (`self.trainer.criterion(x)`)
counts as passing it on: that forward may run on replicas.

An instance a function returns (`return Loss().cuda()`, or a local read only so and returned) is
confined where every call of that function is: the index follows the function's name to the
bindings its callers give the result.

Each file records (``FileResult``): ``bare_built``, the classes it builds so, one entry per
binding (`Loss` for a local, `Loss:criterion:<holder>` for an attribute of a non-module object,
which other files may read, `Loss:()build_loss` for what a function returns); ``escaping``, the
classes it names in any other way (an import does not count, nor a literal `__all__`; a
construction inside a module class is a layer, which ``layer_owners`` records; a name in a module
class's body is `<Class>@<Owner>`, which runs only where that class runs); ``result_bindings``,
how it binds what each lower-case callee returns where every call of it here is bound so; and
``passed_attributes``, the attributes it reads in any other way outside `self` of a module
(`train(trainer.criterion)`, `self.trainer.criterion(x)` in a module). A file no rule walks
records ``escaping = ["*"]``: every word with a capital it holds (its ``mentions``). The project
index settles it (``ClassIndex.called_bare``, ``ClassIndex.unbuilt``), also for the layers only
such classes build.
"""

from __future__ import annotations

import ast
import builtins
from bisect import bisect_right
from collections import Counter
from itertools import compress
from operator import ne
from typing import TYPE_CHECKING

from dpcheck.analysis.names import callee_name
from dpcheck.analysis.scripts import SELF_RETURNING
from dpcheck.analysis.tree import attr_of as _attr_of
from dpcheck.analysis.tree import id_of as _id_of
from dpcheck.analysis.tree import value_of as _value_of

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext

# `escaping` of a file whose text alone was read: every name it mentions may escape.
EVERY_MENTION = "*"
# `escaping` entry `<Class>@<Owner>`: the class is named, not called, in the body of the module
# class `Owner` of the same file (`diffusion_classes = [VDiffusion, KDiffusion]` in a constructor
# that builds one of them): that code runs only where `Owner` runs (ClassIndex.unbuilt).
MENTIONED_IN = "@"
# A binding `()<function>`: the construction is what the function returns (`return PKT()`, `loss = SRloss();
# return loss.cuda()`); the index follows the function's calls (``result_bindings``).
RETURNED = "()"
# Calls whose class argument builds nothing: a type test, and `super(Class, self)`.
_CLASS_ONLY_CALLS = frozenset({"isinstance", "issubclass", "super"})
# Methods that return the instance itself (besides scripts.SELF_RETURNING's moves and modes).
_RETURNS_SELF = SELF_RETURNING | {"apply", "share_memory"}
# Builtins that only look at the object they are handed.
_INSPECTING_CALLS = frozenset({"isinstance", "issubclass", "type", "id", "hasattr"})
_BUILTINS = frozenset(dir(builtins))
# Decorators that only write the class's docstring and return it (transformers' and copies of it):
# they register nothing, so a class they decorate is no more built by name than any other.
_DOCSTRING_DECORATORS = frozenset({"add_start_docstrings", "add_end_docstrings", "auto_docstring",
                                   "add_start_docstrings_to_model_forward", "add_start_docstrings_to_callable"})


def _decorator_name(decorator: ast.AST) -> str:
    """The last name of a decorator (`@add_start_docstrings(...)`, `@utils.auto_docstring`)."""
    if decorator.__class__ is ast.Call:
        decorator = decorator.func
    return decorator.attr if decorator.__class__ is ast.Attribute else getattr(decorator, "id", "")


def may_name_class(name: str) -> bool:
    """Can ``name`` be a class's simple name here: any capital letter in it. Classes are
    capitalised (after their underscores: faster-rcnn's `_RPN`), or camel case with a lower-case
    initial (ChangeFormer's `mIoULoss`); a name of lower-case letters alone is a function, a local
    or a module."""
    return name != name.lower()


def summarize_bare_calls(ctx: FileContext, result) -> None:
    """Fill ``result.bare_built``, ``.escaping``, ``.result_bindings`` and ``.passed_attributes``."""
    parents = ctx.tree_index.parents
    module_classes = {id(info.node) for name, info in ctx.classes.items() if any(ctx.class_is_module(name))}
    known_classes = {id(info.node) for info in ctx.classes.values()}
    own = {stmt.name for stmt in ctx.tree.body if stmt.__class__ is ast.ClassDef}
    aliases = ctx.imports.aliases
    imported = {name for name, target in aliases.items() if may_name_class(name) and not torch_target(target)}
    modules = {name for name, target in aliases.items() if not may_name_class(name) and not torch_target(target)}
    star = any(stmt.__class__ is ast.ImportFrom and any(a.name == "*" for a in stmt.names)
               for stmt in ctx.tree.body)

    def place(node):
        """(innermost function or module scope, whether a class around it is a module of this file,
        whether one is a class the file's summary does not know (nested in a function: it may be a
        module, and layer_owners does not read it), the names of the classes around it)."""
        scope, in_module, unknown, around = None, False, False, []
        cur = parents.get(node)
        while cur is not None:
            kind = cur.__class__
            if scope is None and (kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.Lambda):
                scope = cur
            elif kind is ast.ClassDef:
                around.append(cur.name)
                in_module = in_module or id(cur) in module_classes
                unknown = unknown or id(cur) not in known_classes
            cur = parents.get(cur)
        return scope or ctx.tree, in_module, unknown, around

    position, size = ctx.tree_index.position, ctx.tree_index.size
    # A construction inside a module class of this file is a layer (layer_owners records it): most
    # mentions in a model file, settled by position alone, unless the class itself or a class the
    # summary does not know (nested in a function) is around it, which place() tells.
    module_spans = [(position[info.node], position[info.node] + size[position[info.node]], name)
                    for name, info in ctx.classes.items() if id(info.node) in module_classes]
    unknown_spans = [(position[node], position[node] + size[position[node]]) for node in ctx.nodes(ast.ClassDef)
                     if id(node) not in known_classes]
    module_names = {name for name, info in ctx.classes.items() if id(info.node) in module_classes and "." not in name}
    bare: set[str] = set()
    escaping: set[str] = set()
    # `<Class>@<Owner>` entries made: (class, index of the owner's span in sorted_spans); a model
    # file names the same few classes (annotations, type tests) over and over in each class.
    sorted_spans = sorted(module_spans)
    span_starts = [start for start, _, _ in sorted_spans]
    named_in: set[tuple[str, int]] = set()
    for node, name in _mentions(ctx, own | imported, modules, star):
        parent = parents.get(node)
        called = parent.__class__ is ast.Call and parent.func is node
        if not called and name in escaping:
            continue  # (what follows skips it or adds it to `escaping` again: most mentions in a
            # model file are annotations and type tests of the same few classes)
        at = position[node]
        span = bisect_right(span_starts, at) - 1  # (the module class span that starts last before it)
        if not called and (name, span) in named_in and at < sorted_spans[span][1] \
                and not any(start <= at < end for start, end in unknown_spans):
            continue  # (named in that module class's body already: the same again)
        if called \
                and any(start <= at < end for start, end, _ in module_spans) \
                and not any(start <= at < end and owner == name for start, end, owner in module_spans) \
                and not any(start <= at < end for start, end in unknown_spans):
            continue
        scope, in_module, unknown, around = place(node)
        if name in around:
            continue  # the class's own body (`super(Loss, self)`, a classmethod building one)
        if parent.__class__ is ast.Call and parent.func is not node and callee_name(parent) in _CLASS_ONLY_CALLS:
            continue
        if parent.__class__ is ast.Tuple and callee_name(parents.get(parent)) in _CLASS_ONLY_CALLS:
            continue  # isinstance(m, (Loss, Other))
        if called and not unknown:
            if in_module:
                continue  # a layer of that class: layer_owners records it
            binding = _confined_binding(ctx, parent, scope, module_classes, parents)
            if binding is None:
                binding = _returned_binding(ctx, parent, scope, parents)
            if binding is not None:
                bare.add(name if binding == "" else f"{name}:{binding}")
                continue
        if not called and not unknown and in_module and around[0] in module_names:
            escaping.add(f"{name}{MENTIONED_IN}{around[0]}")
            if span >= 0 and at < sorted_spans[span][1] and sorted_spans[span][2] == around[0]:
                named_in.add((name, span))
            continue
        escaping.add(name)
    # A class a decorator may register, and a class named in a string (a registry's key, a config
    # table), may be built by name.
    escaping.update(stmt.name for stmt in ctx.tree.body if stmt.__class__ is ast.ClassDef and any(
        _decorator_name(decorator) not in _DOCSTRING_DECORATORS for decorator in stmt.decorator_list))
    escaping.update(value for value in _constants_outside_all(ctx) if may_name_class(value))
    result.bare_built = sorted(bare)
    result.escaping = sorted(escaping)
    result.passed_attributes = sorted(_passed_attributes(ctx, module_classes, known_classes, set(aliases), parents))


def _constants_outside_all(ctx: FileContext) -> frozenset[str]:
    """``identifier_constants`` less the names only a literal `__all__` at the top level holds: it
    says what a star import takes, which builds nothing (an importer names what it builds)."""
    constants = identifier_constants(ctx)
    listed = [stmt.value for stmt in ctx.tree.body if stmt.__class__ is ast.Assign
              and stmt.value.__class__ in (ast.List, ast.Tuple)
              and any(t.__class__ is ast.Name and t.id == "__all__" for t in stmt.targets)]
    if not listed:
        return constants
    in_all: dict[str, int] = {}
    for value in listed:
        for element in value.elts:
            if element.__class__ is ast.Constant and element.value in constants:
                in_all[element.value] = in_all.get(element.value, 0) + 1
    if not in_all:
        return constants
    counts = Counter(map(_value_of, ctx.nodes(ast.Constant)))  # (in C: a model file holds thousands)
    return frozenset(value for value in constants if value not in in_all or counts[value] > in_all[value])


def identifier_constants(ctx: FileContext) -> frozenset[str]:
    """The file's string constants that are identifiers (a key a registry or a config table may
    build a class by): this summary and the mentions' (``mentions.summarize_mentions``) read them,
    from one pass over the file's constants."""
    return ctx.fact(_identifier_constants)


def _identifier_constants(ctx: FileContext) -> frozenset[str]:
    return frozenset(value for value in set(map(_value_of, ctx.nodes(ast.Constant)))
                     if value.__class__ is str and value.isidentifier())


def _mentions(ctx: FileContext, names: set[str], modules: set[str], star: bool):
    """(node, class name) for each load of a class name the file defines or imports by name (any
    free name that may name a class under a star import), and each `module.Class` of an imported module.
    (compress() and map() keep the scan of every name in C: few are class names.)"""
    nodes = ctx.nodes(ast.Name)
    if star:
        names = {n.id for n in nodes if may_name_class(n.id) and n.id not in _BUILTINS} | names
    for node in compress(nodes, map(names.__contains__, map(_id_of, nodes))):
        if node.ctx.__class__ is ast.Load:
            yield node, node.id
    attributes = ctx.nodes(ast.Attribute)
    attrs = list(map(_attr_of, attributes))
    for node in compress(attributes, map(ne, attrs, map(str.lower, attrs))):  # may_name_class, in C
        value = node.value
        if value.__class__ is ast.Name and value.id in modules:
            yield node, node.attr


def result_bindings(ctx: FileContext) -> list[str]:
    """`<function>=<binding>` for each function (by the name it is called by) whose every call in this
    file is outside module classes and bound as ``_confined_binding`` or ``_returned_binding`` allow
    (`self.criterion_kd = self._add_kd_components()` in a trainer, `loss_fn = build_loss().cuda()`):
    where the function returns a bare construction, its instance is confined there too. Only
    lower-case callees of assignments and returns are read (a class's call is a construction).
    Asked of the files that record their calls (scripts, trainers: file._record_calls); any other
    file's calls of the name count as handing the result on (ClassIndex._binding_confined)."""
    parents = ctx.tree_index.parents
    module_classes = {id(info.node) for name, info in ctx.classes.items() if any(ctx.class_is_module(name))}
    known_classes = {id(info.node) for info in ctx.classes.values()}
    bound: dict[str, set[str]] = {}
    counted: dict[str, int] = {}  # bound statements by callee
    for begin, end in _gaps_outside_modules(ctx, module_classes, known_classes):
        for kind in (ast.Assign, ast.Return):
            for statement in ctx.tree_index.nodes_between(kind, begin, end):
                value = statement.value
                while value.__class__ is ast.Call and value.func.__class__ is ast.Attribute \
                        and value.func.attr in _RETURNS_SELF:
                    value = value.func.value  # build_loss().cuda()
                if value.__class__ is not ast.Call:
                    continue
                name = callee_name(value)
                if not name or may_name_class(name) or name in _BUILTINS or name in _RETURNS_SELF:
                    continue
                counted[name] = counted.get(name, 0) + 1
                scope = parents.get(statement)
                while scope.__class__ not in (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
                    scope = parents.get(scope)
                binding = _confined_binding(ctx, value, scope, module_classes, parents)
                if binding is None:
                    binding = _returned_binding(ctx, value, scope, parents)
                bound.setdefault(name, set()).add("?" if binding is None else binding)
    bound = {name: bindings for name, bindings in bound.items() if "?" not in bindings}
    if not bound:
        return []
    calls: dict[str, int] = dict.fromkeys(bound, 0)
    for call in ctx.nodes(ast.Call):
        name = callee_name(call)
        if name in calls:
            calls[name] += 1
    # (a callee called more often than in the statements read is also called otherwise, or in a module)
    return sorted(f"{name}={binding}" for name, bindings in bound.items() if calls[name] == counted[name]
                  for binding in bindings)


def _returned_binding(ctx, call: ast.Call, scope, parents) -> str | None:
    """`()<function>` where the construction (after moves) is what the function around it returns:
    `return Loss(...).cuda()`, or a local read only to be called, moved or returned (`crit = Loss();
    return crit`). None elsewhere (a lambda, module level, a nested function: who calls it is not
    read)."""
    if scope.__class__ is not ast.FunctionDef and scope.__class__ is not ast.AsyncFunctionDef:
        return None
    if parents.get(scope).__class__ not in (ast.Module, ast.ClassDef):
        return None
    value = _after_moves(call, parents)
    statement = parents.get(value)
    if statement.__class__ is ast.Return and statement.value is value:
        return RETURNED + scope.name
    if statement.__class__ is not ast.Assign or statement.value is not value or len(statement.targets) != 1 \
            or statement.targets[0].__class__ is not ast.Name:
        return None
    name = statement.targets[0].id
    if any(name in node.names for node in ctx.tree_index.nodes_within(scope, ast.Global)) \
            or any(name in node.names for node in ctx.tree_index.nodes_within(scope, ast.Nonlocal)):
        return None
    returned = False
    for load in ctx.tree_index.nodes_within(scope, ast.Name):
        if load.id != name or load.ctx.__class__ is not ast.Load:
            continue
        up = parents.get(load)
        if up.__class__ is ast.Return and up.value is load:
            returned = True
        elif not _confined_use(load, statement.targets[0], parents):
            return None
    return RETURNED + scope.name if returned else None


def _after_moves(call: ast.Call, parents) -> ast.AST:
    """The outermost of the moves a construction is put through in place (`Loss(...).cuda().to(device)`)."""
    value = call
    while True:
        up = parents.get(value)
        if up.__class__ is ast.Attribute and up.attr in _RETURNS_SELF:
            outer = parents.get(up)
            if outer.__class__ is ast.Call and outer.func is up:
                value = outer
                continue
        return value


def _confined_binding(ctx, call: ast.Call, scope, module_classes, parents) -> str | None:
    """For a construction in code outside any module class: "" when it is bound to a local (or
    module-level) name every read of which is confined; `<attr>:<class>` when it is bound to
    `self.<attr>` in a method of a class that is not a module and never hands `self` on (the reads
    in every file decide: ``passed_attributes``; and no module may inherit the class: the index
    asks); else None."""
    value = _after_moves(call, parents)
    statement = parents.get(value)
    if statement.__class__ is not ast.Assign or statement.value is not value or len(statement.targets) != 1:
        return None
    target = statement.targets[0]
    holder = parents.get(statement)
    while holder.__class__ not in (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        holder = parents.get(holder)
    if holder.__class__ is ast.ClassDef:
        return None  # a class attribute: every instance and subclass reads it
    if target.__class__ is ast.Name:
        name = target.id
        if any(name in node.names for node in ctx.nodes(ast.Global, ast.Nonlocal)):
            return None  # another function may read or rebind it
        at_module_level = scope is ctx.tree
        region = ctx.nodes(ast.Name) if at_module_level else ctx.tree_index.nodes_within(scope, ast.Name)
        shared = {n for node in ctx.nodes(ast.Global, ast.Nonlocal) for n in node.names}
        aliases = _aliases(region, name, shared, parents)
        for current in (name, *aliases):
            for load in region:
                if load.id == current and load.ctx.__class__ is ast.Load:
                    if at_module_level and _enclosing_module_class(load, module_classes, parents):
                        return None  # a module's code reads the module-level instance
                    if not _confined_use(load, target, parents) and not (
                            current == name and _alias_target(load, parents) in aliases):
                        return None
        return ""
    if target.__class__ is not ast.Attribute or target.value.__class__ is not ast.Name \
            or scope.__class__ is ast.Lambda or scope is ctx.tree or not scope.args.args \
            or target.value.id != scope.args.args[0].arg:
        return None
    owner = parents.get(scope)
    if owner.__class__ is not ast.ClassDef or not _keeps_self(ctx, owner, parents):
        return None
    return f"{target.attr}:{ctx.module}.{owner.name}"


def _keeps_self(ctx, owner: ast.ClassDef, parents) -> bool:
    """Does no method of the class hand its `self` on (`Net(self)`, `hooks.append(self)`)? Then
    what it holds is reached only through its own methods and through reads of its attributes."""
    for method in owner.body:
        if method.__class__ is not ast.FunctionDef and method.__class__ is not ast.AsyncFunctionDef \
                or not method.args.args:
            continue
        me = method.args.args[0].arg
        for load in ctx.tree_index.nodes_within(method, ast.Name):
            if load.id == me and load.ctx.__class__ is ast.Load and not _confined_use(load, load, parents):
                return False
    return True


def _aliases(region, name: str, shared: set[str], parents) -> list[str]:
    """The other local names the scope binds to the instance named ``name`` as it is (`loss_fn = lsr`
    on one arm, `loss_fn = nn.CrossEntropyLoss()` on the other): their reads are reads of the instance
    (one level: a read of an alias that binds a third name is a use that hands it on). Not a name
    another function may read (``shared``: declared global or nonlocal somewhere)."""
    found = []
    for load in region:
        if load.id == name and load.ctx.__class__ is ast.Load:
            alias = _alias_target(load, parents)
            if alias is not None and alias != name and alias not in shared and alias not in found:
                found.append(alias)
    return found


def _alias_target(load: ast.AST, parents) -> str | None:
    """The name a read is bound to as it is (`loss_fn = lsr`: `loss_fn`), or None."""
    statement = parents.get(load)
    if statement.__class__ is ast.Assign and statement.value is load and len(statement.targets) == 1 \
            and statement.targets[0].__class__ is ast.Name:
        return statement.targets[0].id
    return None


def _enclosing_module_class(node, module_classes, parents, known_classes=None) -> bool:
    """Is ``node`` inside a class that may be a module (with ``known_classes``: or that the file's
    summary does not know, a class nested in a function)?"""
    cur = parents.get(node)
    while cur is not None:
        if cur.__class__ is ast.ClassDef and (id(cur) in module_classes
                                               or known_classes is not None and id(cur) not in known_classes):
            return True
        cur = parents.get(cur)
    return False


def _confined_use(load: ast.AST, binding: ast.AST, parents) -> bool:
    """Is this read of the instance a call of it, a read through it, or a move that keeps it in
    the same binding (`crit = crit.cuda()`, `crit.to(device)` as a statement)?"""
    parent = parents.get(load)
    if parent.__class__ is ast.Call:
        # crit(out, y), isinstance(crit, RingLoss); not train(crit)
        return parent.func is load or parent.func.__class__ is ast.Name and parent.func.id in _INSPECTING_CALLS
    if parent.__class__ is ast.Compare:
        return all(op.__class__ is ast.Is or op.__class__ is ast.IsNot for op in parent.ops)  # crit is None
    if parent.__class__ is not ast.Attribute:
        return False
    outer = parents.get(parent)
    if outer.__class__ is not ast.Call or outer.func is not parent or parent.attr not in _RETURNS_SELF:
        return True  # crit.t = 0.1, crit.memory, crit.parameters(), crit.forward(x)
    statement = parents.get(outer)
    if statement.__class__ is ast.Expr:
        return True
    return statement.__class__ is ast.Assign and len(statement.targets) == 1 \
        and _same_place(statement.targets[0], binding)


def _same_place(target: ast.AST, read: ast.AST) -> bool:
    """Do a store target and a read name the same binding (`crit`, `self.crit`)?"""
    while target.__class__ is ast.Attribute and read.__class__ is ast.Attribute and target.attr == read.attr:
        target, read = target.value, read.value
    return target.__class__ is ast.Name and read.__class__ is ast.Name and target.id == read.id


def _gaps_outside_modules(ctx: FileContext, module_classes, known_classes) -> list[tuple[int, int]]:
    """The code outside the classes that may be modules (and those the summary does not know): the
    gaps between their spans, in preorder (a model file's code is nearly all inside)."""
    position, size = ctx.tree_index.position, ctx.tree_index.size
    spans = sorted((position[node], position[node] + size[position[node]]) for node in ctx.nodes(ast.ClassDef)
                   if id(node) in module_classes or id(node) not in known_classes)
    gaps, start = [], 0
    for begin, end in spans:
        if begin > start:
            gaps.append((start, begin))
        start = max(start, end)
    gaps.append((start, len(position)))
    return gaps


def _passed_attributes(ctx: FileContext, module_classes, known_classes, modules, parents) -> set[str]:
    """Attributes this file reads other than confined (see ``_confined_use``) outside module
    classes; not those of an imported module (`torch.float32`). (A module's code reaches a non-module
    object's attribute only through an object handed to it, which ``_keeps_self`` and the checks
    of locals rule out.)"""
    index = ctx.tree_index
    passed: set[str] = set()
    for begin, end in _gaps_outside_modules(ctx, module_classes, known_classes):
        for node in index.nodes_between(ast.Attribute, begin, end):
            attr = node.attr
            if attr in passed or node.ctx.__class__ is not ast.Load or _confined_use(node, node, parents):
                continue
            root = node.value
            while root.__class__ is ast.Attribute:
                root = root.value
            if not (root.__class__ is ast.Name and root.id in modules):
                passed.add(attr)
    return passed


def torch_target(target: str) -> bool:
    """Does an import alias's target (``ImportMap.aliases``) name torch or a module of it?"""
    return target == "torch" or target.startswith("torch.")
