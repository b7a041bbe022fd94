"""Shared facts about a file and its nn.Module classes, computed once per file.

Every rule reads these instead of walking the tree itself:

* which classes are modules (directly, through in-file bases, or conditionally on a
  base defined elsewhere in the scanned tree, see ``dpcheck.index``);
* what each attribute on ``self`` is: Parameter, buffer, submodule, plain tensor,
  container (and whether it holds modules), device;
* which methods run during ``forward``: forward, the methods of ``self`` it uses,
  transitively (calls, ``super()`` calls, properties, callbacks), and hooks the class
  registers on itself or on its children.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from typing import Iterator

from dpcheck.analysis.classes import ClassInfo
from dpcheck.analysis.context import FileContext, code_names
from dpcheck.analysis.torch_api import (
    CONTAINER_CTORS,
    PARAMETER_CTORS,
    TENSOR_FACTORIES,
    TENSOR_METHODS,
    VARIABLE_CTORS,
    FunctionNode,
)
from dpcheck.analysis.tree import FunctionInfo, cached_property
from dpcheck.record import field, record

# What a call on ``self`` in code outside forward tells about an attribute.
_REGISTERS = {"register_buffer": "buffer", "register_parameter": "parameter",
              "add_module": "module", "register_module": "module"}
_FILLS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "appendleft"})
# The callee names (`setattr(...)`, `<x>.<attr>(...)`) ``_record_call`` can record anything for:
# ``attrs`` passes it only those calls, not every call of every method.
_RECORDED_CALLS = frozenset({"setattr", *_REGISTERS, *_FILLS})


@record
class AttrFacts:
    """Everything the class does to ``self.<name>`` outside forward-reachable code."""

    kinds: set[str] = field(default_factory=set)  # parameter/buffer/module/tensor/...
    assignments: list[tuple[ast.AST, ast.AST, FunctionInfo]] = field(default_factory=list)
    element_kinds: set[str] = field(default_factory=set)  # for containers: what they hold
    requires: set[str] = field(default_factory=set)  # unresolved classes of module elements

    @property
    def registered(self) -> bool:
        return bool(self.kinds & {"parameter", "buffer", "module"})



# The key of ``ModelClass.self_stores`` for the items of ``self.<name>`` (`self.losses[key] = v`).
ITEM = "[]"


@record
class SelfStore:
    """One store in ``self.<name>``: the value, the method that stores it, and for `self.x += v`
    the operator (the attribute then holds its old value combined with ``value``)."""

    value: ast.AST
    fn: FunctionInfo
    op: ast.operator | None


def file_models(ctx: FileContext) -> list[ModelClass]:
    """The file's module classes (certain, or modules on a condition on the index), built once
    for the rules and the per-file summaries that read them."""
    return ctx.fact(_file_models)


def _file_models(ctx: FileContext) -> list[ModelClass]:
    return [ModelClass(ctx, info, needs) for name, info in ctx.classes.items()
            for sure, needs in [ctx.class_is_module(name)] if sure or needs]


class ModelClass:
    """An nn.Module subclass seen with its in-file bases: attributes and forward-reachable code."""

    def __init__(self, ctx: FileContext, info: ClassInfo, requires: frozenset[str]):
        self.ctx = ctx
        self.info = info
        # Non-empty when module-ness depends on a base defined in another file.
        self.requires = requires
        # Cross-file conditions a rule's check relied on (e.g. ``gathered:<class>``): the
        # analysis attaches them to that rule's findings for this class, then clears them.
        self.conditions: set[str] = set()
        self.mro = self.ctx.in_file_mro(info)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def wrap_evidence(self) -> str:
        """"wrapped" | "top-level" | "submodule" (see dpcheck.analysis.wrapping)."""
        from dpcheck.analysis.wrapping import wrap_evidence

        return wrap_evidence(self)

    def function(self, node: FunctionNode, owner: ClassInfo | None) -> FunctionInfo:
        return self.ctx.function(node, owner)

    def find_method(self, name: str, after: ClassInfo | None = None) -> FunctionInfo | None:
        mro = self.mro
        if after is not None and after in mro:
            mro = mro[mro.index(after) + 1:]
        for cls in mro:
            if name in cls.methods:
                return self.function(cls.methods[name], cls)
        return None

    def find_setter(self, name: str) -> FunctionInfo | None:
        for cls in self.mro:
            if cls.setters and name in cls.setters:
                return self.function(cls.setters[name], cls)
        return None

    def has_property(self, name: str) -> bool:
        return any(name in cls.properties for cls in self.mro)

    @cached_property
    def all_methods(self) -> list[FunctionInfo]:
        seen: dict[str, FunctionInfo] = {}
        for cls in self.mro:
            for name, node in cls.methods.items():
                seen.setdefault(name, self.function(node, cls))
            for name, node in (cls.setters or {}).items():
                seen.setdefault(f"{name}.setter", self.function(node, cls))
        return list(seen.values())

    @cached_property
    def forward(self) -> FunctionInfo | None:
        return self.find_method("forward")

    @cached_property
    def reachable(self) -> list[FunctionInfo]:
        """forward, what it reaches on self, and the hooks the class registers."""
        roots: list[FunctionInfo] = []
        if self.forward is not None:
            roots.append(self.forward)
        roots.extend(self.hooks)
        return self._reach(roots)

    @cached_property
    def _forward_code(self) -> frozenset[int]:
        """Ids of the function nodes forward reaches on self, hooks left out."""
        return frozenset(id(fn.node) for fn in self._reach([self.forward] if self.forward is not None else []))

    def _reach(self, roots: list[FunctionInfo]) -> list[FunctionInfo]:
        seen: dict[int, FunctionInfo] = {}
        work = list(roots)
        while work:
            fn = work.pop(0)
            if id(fn.node) in seen:
                continue
            seen[id(fn.node)] = fn
            self_name = fn.self_name
            for node in fn.nodes(ast.Attribute):
                value = node.value  # `self.<attr>` (``fn.self_attr``, inline: every attribute of the code)
                if value.__class__ is ast.Name and value.id == self_name:
                    attr = node.attr
                    # A read runs a property's getter; a write runs its setter.
                    target = self.find_setter(attr) if isinstance(node.ctx, ast.Store) else self.find_method(attr)
                    if target is not None and target.node is not fn.node:
                        work.append(target)
            for call in fn.nodes(ast.Call):
                # super().name(...) resolves past the defining class in the MRO.
                func = call.func
                if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
                        and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"):
                    target = self.find_method(func.attr, after=fn.owner)
                    if target is not None:
                        work.append(target)
        return list(seen.values())

    @cached_property
    def in_forward(self) -> list[FunctionInfo]:
        """Reachable code minus the hooks (what hooks write is judged as hook code)."""
        hooks = {id(h.node) for h in self.hooks}
        return [fn for fn in self.reachable if id(fn.node) not in hooks]

    def is_reachable(self, fn: FunctionInfo) -> bool:
        return any(r.node is fn.node for r in self.reachable)

    @cached_property
    def hooks(self) -> list[FunctionInfo]:
        """Hook functions the class registers on itself or its children (any method)."""
        found: list[FunctionInfo] = []
        if not self.ctx.fact(registers_hooks):
            return found
        for fn in self.all_methods:
            for call in fn.nodes(ast.Call):
                func = call.func
                if not (isinstance(func, ast.Attribute) and func.attr.startswith("register_")
                        and func.attr.endswith("hook") and call.args):
                    continue
                receiver = func.value
                if not (fn.is_self(receiver) or _rooted_at_self(receiver, fn)):
                    continue
                if _scoped_registration(call, fn) and id(fn.node) not in self._forward_code:
                    # Registered and removed again within a method forward does not reach (a
                    # Grad-CAM or attention probe that calls `self(x)` in between): the hook runs
                    # only during that method, on the module it is called on, never on a replica.
                    continue
                target = call.args[0]
                attr = fn.self_attr(target)
                if attr is not None:
                    method = self.find_method(attr)
                    if method is not None:
                        found.append(method)
                elif isinstance(target, ast.Lambda):
                    found.append(self.function(target, fn.owner))
                elif isinstance(target, ast.Name):
                    for nested in fn.nodes(ast.FunctionDef):
                        if nested.name == target.id:
                            found.append(self.function(nested, fn.owner))
                elif isinstance(target, ast.Call) and isinstance(target.func, ast.Name):
                    # A hook factory of this file: `register_forward_hook(grab("proj"))`.
                    for factory in self.ctx.tree.body:
                        if isinstance(factory, ast.FunctionDef) and factory.name == target.func.id:
                            found.extend(self.function(inner, None) for inner in ast.walk(factory)
                                         if isinstance(inner, (ast.FunctionDef, ast.Lambda)) and inner is not factory)
        return found

    @cached_property
    def attrs(self) -> dict[str, AttrFacts]:
        """Facts about ``self.<name>`` gathered from code that does not run in forward."""
        facts: dict[str, AttrFacts] = {}
        reachable = {id(f.node) for f in self.reachable}
        # Every in-file base's __init__ too: `super().__init__(...)` runs the one it overrides.
        inits = [self.function(cls.methods["__init__"], cls) for cls in self.mro if "__init__" in cls.methods]
        seen_nodes = {id(f.node) for f in self.all_methods}
        for fn in self.all_methods + [f for f in inits if id(f.node) not in seen_nodes]:
            if id(fn.node) in reachable:
                continue
            for node in fn.nodes(ast.Assign, ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if node.value is None:
                    continue
                for target in targets:
                    if isinstance(target, ast.Name):
                        continue  # a local (most assignments): no `self.<name>` bound
                    for name, value in _self_bindings(target, node.value, fn):
                        fact = _facts_of(facts, name)
                        kind, elements, requires = self.classify(value, fn)
                        fact.kinds.add(kind)
                        fact.element_kinds |= elements
                        fact.requires |= requires
                        fact.assignments.append((target, value, fn))
            for call in fn.nodes(ast.Call):
                func = call.func
                callee = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
                if callee in _RECORDED_CALLS:
                    self._record_call(call, fn, facts)
        return facts

    @cached_property
    def self_stores(self) -> dict[str, list[SelfStore] | None]:
        """``self.<name>`` -> every value the class's methods (forward's code included) store in it,
        or None where one store is not a plain one (a tuple unpacked into it, `setattr`, a `del`):
        what a read of the attribute can hold, asked of the few attributes a rule follows."""
        stores: dict[str, list[SelfStore] | None] = {}
        inits = [self.function(cls.methods["__init__"], cls) for cls in self.mro if "__init__" in cls.methods]
        seen_nodes = {id(f.node) for f in self.all_methods}
        for fn in self.all_methods + [f for f in inits if id(f.node) not in seen_nodes]:
            for node in fn.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        continue
                    attr = fn.self_attr(target)
                    if attr is not None:
                        if isinstance(node, ast.Delete) or node.value is None or stores.get(attr, []) is None:
                            stores[attr] = None
                        else:
                            stores.setdefault(attr, []).append(
                                SelfStore(node.value, fn, node.op if isinstance(node, ast.AugAssign) else None))
                    elif isinstance(target, ast.Subscript) and (attr := fn.self_attr(target.value)) is not None:
                        # `self.losses[key] = v`: an item of the attribute (``<name>[]``).
                        item = attr + ITEM
                        if isinstance(node, ast.Delete) or node.value is None or stores.get(item, []) is None:
                            stores[item] = None
                        else:
                            stores.setdefault(item, []).append(
                                SelfStore(node.value, fn, node.op if isinstance(node, ast.AugAssign) else None))
                    elif isinstance(target, (ast.Tuple, ast.List)):
                        for elt in ast.walk(target):
                            if (attr := fn.self_attr(elt)) is not None:
                                stores[attr] = None
            for call in fn.nodes(ast.Call):
                func = call.func
                if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and call.args \
                        and fn.is_self(call.args[0]) and len(call.args) > 1 and isinstance(call.args[1], ast.Constant):
                    stores[str(call.args[1].value)] = None
                elif isinstance(func, ast.Attribute) and func.attr in _FILLS \
                        and (attr := fn.self_attr(func.value)) is not None:
                    stores[attr + ITEM] = None  # `self.losses.update(...)`: items the stores do not show
        return stores

    def _record_call(self, call: ast.Call, fn: FunctionInfo, facts: dict[str, AttrFacts]) -> None:
        func = call.func
        if not isinstance(func, ast.Attribute):
            if isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) == 3 \
                    and fn.is_self(call.args[0]) and isinstance(call.args[1], ast.Constant) \
                    and isinstance(call.args[1].value, str):
                fact = _facts_of(facts, call.args[1].value)
                kind, elements, requires = self.classify(call.args[2], fn)
                fact.kinds.add(kind)
                fact.element_kinds |= elements
                fact.requires |= requires
            return
        registered = _REGISTERS.get(func.attr)
        if registered and fn.is_self(func.value) and call.args \
                and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            _facts_of(facts, call.args[0].value).kinds.add(registered)
            return
        # self.layers.append(nn.Linear(...)) in __init__ fills a plain list with modules.
        if func.attr not in _FILLS or not call.args:
            return
        attr = fn.self_attr(func.value)
        if attr is not None:
            value = call.args[-1]
            fact = _facts_of(facts, attr)
            values = value.elts if func.attr == "extend" and isinstance(
                value, (ast.List, ast.Tuple)) else [value]
            for v in values:
                kind, elements, requires = self.classify(v, fn)
                if func.attr == "extend":
                    fact.element_kinds |= elements
                else:
                    fact.element_kinds.add(kind)
                fact.requires |= requires

    def classify(self, value: ast.AST, fn: FunctionInfo | None = None) -> tuple[str, set[str], set[str]]:
        """(kind, kinds of its elements if a container, unresolved module classes it needs)."""
        ctx = self.ctx
        if isinstance(value, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
            elements, requires = set(), set()
            for elt in value.values if isinstance(value, ast.Dict) else value.elts:
                kind, _, req = self.classify(elt, fn)
                elements.add(kind)
                requires |= req
            return "container", elements, requires
        if isinstance(value, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            kind, _, req = self.classify(value.elt, fn)
            return "container", {kind}, req
        if isinstance(value, ast.DictComp):
            kind, _, req = self.classify(value.value, fn)
            return "container", {kind}, req
        if isinstance(value, ast.Constant):
            if isinstance(value.value, str) and value.value.startswith(("cuda", "cpu")):
                return "device", set(), set()
            return "constant", set(), set()
        if isinstance(value, ast.Attribute) and value.attr == "device":
            return "device", set(), set()
        if not isinstance(value, ast.Call):
            return "other", set(), set()
        name = ctx.resolve(value.func)
        if name in PARAMETER_CTORS:
            return "parameter", set(), set()
        if name in ("torch.nn.Buffer", "torch.nn.parameter.Buffer"):
            return "buffer", set(), set()
        if name == "torch.device":
            return "device", set(), set()
        if name in VARIABLE_CTORS:
            # The pre-0.4 wrapper returns its tensor argument (anything else raises): a tensor
            # whatever the argument is spelled as (`Variable(self.priorbox.forward())`).
            if value.args:
                inner, elements, req = self.classify(value.args[0], fn)
                if inner in ("tensor", "scalar_tensor", "parameter"):
                    return inner, elements, req
            return "tensor", set(), set()
        if name in CONTAINER_CTORS:
            if value.args:
                kind, elements, req = self.classify(value.args[0], fn)
                return "container", elements, req
            return "container", set(), set()
        if name and name.startswith("torch.") and name.rsplit(".", 1)[-1] in TENSOR_FACTORIES \
                and name.count(".") == 1:
            if name.endswith((".tensor", ".as_tensor")) and value.args and _is_number(value.args[0]):
                return "scalar_tensor", set(), set()
            return "tensor", set(), set()
        is_module, requires = ctx.callee_module_status(value)
        if is_module:
            return "module", set(), set()
        if requires:
            return "maybe_module", set(), set(requires)
        if isinstance(value.func, ast.Attribute) and value.func.attr in TENSOR_METHODS:
            inner, elements, req = self.classify(value.func.value, fn)
            if inner in ("tensor", "scalar_tensor", "module", "parameter"):
                return ("tensor" if inner == "scalar_tensor" else inner), elements, req
        return "other", set(), set()


@cache
def _hook_registration_names() -> re.Pattern:
    return re.compile(r"^register_.*hook$", re.MULTILINE)


def _facts_of(facts: dict[str, AttrFacts], name: str) -> AttrFacts:
    """``facts.setdefault(name, AttrFacts())`` without building a record for every attribute seen again."""
    fact = facts.get(name)
    if fact is None:
        fact = facts[name] = AttrFacts()
    return fact


def registers_hooks(ctx: FileContext) -> bool:
    """Can the file call a `*.register_*hook`? Most model files cannot: then no class's methods
    need searching for hook registrations. (A name of the file's code spelled so, attribute or
    not: ``ModelClass.hooks`` checks the calls themselves.)"""
    names = ctx.fact(code_names)
    return "register_" in names and _hook_registration_names().search(names) is not None


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool))


def _scoped_registration(call: ast.Call, fn: FunctionInfo) -> bool:
    """Is the handle of this `register_*hook(...)` call removed within the same function: bound to
    a name whose `.remove()` the function calls, appended to a local list whose items it removes
    in a loop, or used as a `with` context (a RemovableHandle removes itself on exit)?"""
    parent = fn.parent(call)
    if isinstance(parent, ast.withitem):
        return True
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        handle = parent.targets[0].id
        return any(_removes(c, handle) for c in fn.nodes(ast.Call))
    if isinstance(parent, ast.Call) and call in parent.args and isinstance(parent.func, ast.Attribute) \
            and parent.func.attr in ("append", "extend", "insert") and isinstance(parent.func.value, ast.Name):
        handles = parent.func.value.id
        loops = [*fn.nodes(ast.For), *fn.nodes(ast.comprehension)]
        return any(isinstance(loop.iter, ast.Name) and loop.iter.id == handles and isinstance(loop.target, ast.Name)
                   and any(_removes(c, loop.target.id) for c in fn.nodes_under(loop if isinstance(loop, ast.For)
                                                                             else fn.parent(loop), ast.Call))
                   for loop in loops)
    return False


def _removes(call: ast.Call, name: str) -> bool:
    """`name.remove()`."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "remove" and not call.args \
        and isinstance(func.value, ast.Name) and func.value.id == name


def _rooted_at_self(node: ast.AST, fn: FunctionInfo) -> bool:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return fn.is_self(node)


def _self_bindings(target: ast.AST, value: ast.AST, fn: FunctionInfo) -> Iterator[tuple[str, ast.AST]]:
    attr = fn.self_attr(target)
    if attr is not None:
        yield attr, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        elts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
        for i, elt in enumerate(target.elts):
            sub = elts[i] if elts is not None and i < len(elts) else ast.Constant(None)
            yield from _self_bindings(elt, sub, fn)




# The condition of a finding about a read of `self.<attr>` that no class of the file defines:
# ``parameter_property:<base>:<attr>`` holds where the base class (of another file), or a base of
# it, defines <attr> as a property whose getter takes `next(self.parameters())` (``parameter_properties``).
PARAMETER_PROPERTY_CONDITION = "parameter_property:"
# Module methods whose iterator is empty on a DataParallel replica.
PARAMETER_QUERIES = frozenset({"parameters", "named_parameters"})


def parameter_properties(ctx: FileContext) -> dict[str, list[str]]:
    """This file's classes -> their properties whose getter takes `next(self.parameters())` (or of
    `named_parameters()`) with no default and outside any `try` (neural_sp's `ModelBase.device`,
    `next(self.parameters()).device`): read on a DataParallel replica, the getter raises
    StopIteration. A class of another file that reads the property in forward learns it from here."""
    if "parameters()" not in ctx.source.text:
        return {}
    found: dict[str, list[str]] = {}
    for info in ctx.classes.values():
        names = sorted(name for name in info.properties
                       if name in info.methods and _takes_next_parameter(info.methods[name]))
        if names:
            found[info.qualname] = names
    return found


def _takes_next_parameter(getter: FunctionNode) -> bool:
    args = getter.args.posonlyargs + getter.args.args
    if not args or any(isinstance(n, ast.Try) for n in ast.walk(getter)):
        return False
    this = args[0].arg
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "next" and len(n.args) == 1
               and not n.keywords and isinstance(query := n.args[0], ast.Call)
               and isinstance(query.func, ast.Attribute) and query.func.attr in PARAMETER_QUERIES
               and isinstance(query.func.value, ast.Name) and query.func.value.id == this
               for n in ast.walk(getter))


def summarize_parameter_properties(ctx: FileContext, result) -> None:
    """Fill ``result.parameter_properties`` for the class index (see ``parameter_properties``)."""
    result.parameter_properties = parameter_properties(ctx)


# The condition of a finding about a store on a DataParallel wrapper (`model.mode = "gru"`):
# ``forward_flag:<class>:<attr>`` holds where the wrapped class's own forward tests `self.<attr>`
# (``forward_flags``); the wrapper's attribute never reaches that test.
FORWARD_FLAG_CONDITION = "forward_flag:"
# Statements and expressions whose test decides what forward runs.
_TESTS = (ast.If, ast.IfExp, ast.While, ast.Assert)


def forward_flags(ctx: FileContext) -> dict[str, list[str]]:
    """This file's classes -> the attributes of `self` their own `forward` compares with a string in
    a test (`if self.forward_mode == "cnn":`, `x if self.mode != "encoder" else y`, `assert
    self.stage in ("a", "b")`): a mode switch that a training script flips between phases. A store
    of such a name on a DataParallel wrapper sets the wrapper's attribute, and the replicas' forward
    still tests the module's own (see rules/dp701). Flags taken for their truth (`if self.use_aux:`)
    are not recorded: every model library tests dozens (`self.gradient_checkpointing`), and the
    index would carry them for every class of a large tree (transformers `models/`: about 2,000
    classes, against about 110 with string modes)."""
    found: dict[str, list[str]] = {}
    ctx.nodes(ast.If)  # (the file's walk, which ``tree_index`` answers from)
    index = ctx.tree_index
    for info in ctx.classes.values():
        forward = info.methods.get("forward")
        if forward is None:
            continue
        attrs = {operand.attr for kind in _TESTS for node in index.nodes_within(forward, kind)
                 for compare in index.nodes_within(node.test, ast.Compare)
                 if any(_strings(operand) for operand in (compare.left, *compare.comparators))
                 for operand in (compare.left, *compare.comparators)
                 if isinstance(operand, ast.Attribute) and isinstance(operand.value, ast.Name)
                 and operand.value.id == "self"}
        if attrs:
            found[info.qualname] = sorted(attrs)
    return found


def _strings(node: ast.AST) -> bool:
    """A string constant, or a tuple, list or set of them (`in ("cnn", "gru")`)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_strings(e) for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def summarize_forward_flags(ctx: FileContext, result) -> None:
    """Fill ``result.forward_flags`` for the class index (see ``forward_flags``)."""
    result.forward_flags = ctx.fact(forward_flags)
