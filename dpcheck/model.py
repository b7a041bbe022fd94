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
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator

from dpcheck.names import ImportMap, dotted, self_attr
from dpcheck.source import SourceFile

MODULE_BASES = frozenset({
    "torch.nn.Module", "torch.nn.modules.module.Module", "torch.nn.modules.Module",
    # Third-party bases that are nn.Modules even when their package is not scanned.
    "transformers.PreTrainedModel", "transformers.modeling_utils.PreTrainedModel",
    "pytorch_lightning.LightningModule", "lightning.pytorch.LightningModule",
    "lightning.LightningModule", "timm.models.layers.Module",
})
# Base names that can never make a class a module: no need to wait for the index.
_NEVER_MODULE_ROOTS = ("builtins.", "typing.", "enum.", "abc.", "collections.", "dataclasses.",
                       "tensorflow.", "keras.", "flax.", "jax.", "numpy.", "tf.", "pydantic.",
                       "unittest.", "argparse.", "json.", "threading.")
_NEVER_MODULE = frozenset({"object", "Exception", "ValueError", "RuntimeError", "dict", "list",
                           "tuple", "str", "int", "float", "set", "NamedTuple", "Protocol",
                           "Generic", "ABC", "Enum", "TypedDict"})

PARAMETER_CTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter",
                             "torch.nn.UninitializedParameter", "torch.Parameter"})
TENSOR_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn",
    "randint", "randperm", "arange", "range", "linspace", "logspace", "eye", "tril", "triu",
    "stack", "cat", "load", "tril_indices", "triu_indices", "meshgrid", "Tensor", "FloatTensor",
    "LongTensor", "BoolTensor", "ByteTensor", "IntTensor", "DoubleTensor", "HalfTensor",
    "polar", "complex", "bernoulli", "normal", "exp", "cos", "sin", "outer", "einsum",
})
_TENSOR_METHODS = frozenset({"cuda", "to", "float", "double", "half", "long", "int", "bool",
                             "t", "T", "view", "reshape", "unsqueeze", "expand", "repeat",
                             "contiguous", "detach", "clone", "bfloat16", "transpose", "permute",
                             "flatten", "squeeze", "pin_memory", "type", "sqrt", "exp", "log"})
CONTAINER_CTORS = frozenset({"list", "dict", "set", "collections.OrderedDict",
                             "collections.defaultdict", "collections.deque",
                             "collections.Counter", "typing.OrderedDict"})
MODULE_CONTAINERS = frozenset({"ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
                               "Sequential"})

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def is_torch_nn_class(name: str | None) -> bool:
    """``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``… (a class, not a function)."""
    if not name or not name.startswith("torch.nn."):
        return False
    last = name.rsplit(".", 1)[-1]
    return (last[:1].isupper() and not name.startswith("torch.nn.functional.")
            and not name.startswith("torch.nn.init.") and name not in PARAMETER_CTORS
            and not name.startswith("torch.nn.utils.") and last not in {"Buffer"})


_SINGLETONS = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)


class TreeIndex:
    """One preorder walk of a file: every node in order, each node's parent, and subtree spans.

    A subtree is a contiguous slice of the preorder list, so a function's nodes are
    found without walking it again.
    """

    def __init__(self, tree: ast.AST) -> None:
        order: list[ast.AST] = []
        parents: dict[int, ast.AST] = {}
        stack: list[ast.AST] = [tree]
        while stack:
            node = stack.pop()
            order.append(node)
            # Load/Store and operator nodes are shared singletons in CPython: leave them out.
            children = [c for c in ast.iter_child_nodes(node) if not isinstance(c, _SINGLETONS)]
            for child in children:
                parents[id(child)] = node
            stack.extend(reversed(children))
        position = {id(node): i for i, node in enumerate(order)}
        size = [1] * len(order)
        for i in range(len(order) - 1, 0, -1):
            size[position[id(parents[id(order[i])])]] += size[i]
        self.order = order
        self.parents = parents
        self.position = position
        self.size = size
        by_type: dict[type, list[ast.AST]] = {}
        for node in order:
            by_type.setdefault(type(node), []).append(node)
        self.by_type = by_type

    def subtree(self, node: ast.AST) -> list[ast.AST]:
        """``node`` and everything under it, in preorder."""
        start = self.position[id(node)]
        return self.order[start:start + self.size[start]]


class _Indexed:
    """`nodes(*types)` and `parent(node)` over an ``_index`` (nodes by type, parents) built once."""

    def nodes(self, *types: type) -> Iterator[ast.AST]:
        """All nodes of the given types, in source order per type."""
        by_type = self._index[0]
        for t in types:
            yield from by_type.get(t, ())

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self._index[1].get(id(node))


@dataclass
class FunctionInfo(_Indexed):
    """One function body with indexes that rules query instead of re-walking it."""

    node: FunctionNode
    owner: "ClassInfo | None"
    tree_index: "TreeIndex | None" = None

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")

    @cached_property
    def self_name(self) -> str:
        args = self.node.args.posonlyargs + self.node.args.args
        return args[0].arg if args else "self"

    @cached_property
    def _index(self) -> tuple[dict[type, list[ast.AST]], dict[int, ast.AST]]:
        # The body's statements (not the signature or decorators), from the file's one walk;
        # a function met on its own gets a walk of its own.
        index = self.tree_index
        if index is None or id(self.node) not in index.position:
            index = TreeIndex(self.node)
        by_type: dict[type, list[ast.AST]] = {}
        body = self.node.body if isinstance(self.node.body, list) else [self.node.body]
        for stmt in body:
            for node in index.subtree(stmt):
                by_type.setdefault(type(node), []).append(node)
        return by_type, index.parents

    def is_self(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == self.self_name

    def self_attr(self, node: ast.AST) -> str | None:
        return self_attr(node, self.self_name)

    @cached_property
    def local_values(self) -> dict[str, list[ast.AST]]:
        """Local name -> every expression assigned to it in this body (augmented ones too)."""
        values: dict[str, list[ast.AST]] = {}
        for node in self.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    _bind(target, node.value, values)
            elif node.value is not None:
                if isinstance(node, ast.AugAssign):
                    _bind(node.target, ast.BinOp(node.target, node.op, node.value), values)
                else:
                    _bind(node.target, node.value, values)
        return values

    def returns(self) -> Iterator[ast.AST]:
        """Values this function itself returns (not those of nested functions)."""
        for node in self.nodes(ast.Return):
            if node.value is not None and self._enclosing_function(node) is self.node:
                yield node.value
        if isinstance(self.node, ast.Lambda):
            yield self.node.body

    def _enclosing_function(self, node: ast.AST) -> ast.AST | None:
        cur = self.parent(node)
        while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                        ast.Lambda)):
            cur = self.parent(cur)
        return cur


def _bind(target: ast.AST, value: ast.AST, values: dict[str, list[ast.AST]]) -> None:
    if isinstance(target, ast.Name):
        values.setdefault(target.id, []).append(value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        elts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
        for i, elt in enumerate(target.elts):
            if elts is not None and i < len(elts) and not isinstance(elt, ast.Starred):
                _bind(elt, elts[i], values)
            elif isinstance(elt, ast.Name):
                values.setdefault(elt.id, []).append(ast.Subscript(value, ast.Constant(i)))


@dataclass
class ClassInfo:
    node: ast.ClassDef
    qualname: str
    bases: tuple[str, ...]  # resolved dotted names
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    properties: frozenset[str]

    @property
    def name(self) -> str:
        return self.node.name


@dataclass
class AttrFacts:
    """Everything the class does to ``self.<name>`` outside forward-reachable code."""

    kinds: set[str] = field(default_factory=set)  # parameter/buffer/module/tensor/...
    assignments: list[tuple[ast.AST, ast.AST, FunctionInfo]] = field(default_factory=list)
    element_kinds: set[str] = field(default_factory=set)  # for containers: what they hold
    requires: set[str] = field(default_factory=set)  # unresolved classes of module elements

    @property
    def registered(self) -> bool:
        return bool(self.kinds & {"parameter", "buffer", "module"})


@dataclass
class FileContext(_Indexed):
    """One parsed file: its tree, imports, source and module classes."""

    source: SourceFile
    tree: ast.Module
    module: str
    imports: ImportMap
    classes: dict[str, ClassInfo] = field(default_factory=dict)  # by simple name, in-file
    module_status: dict[str, tuple[bool, frozenset[str]]] = field(default_factory=dict)
    tree_index: TreeIndex | None = None

    def resolve(self, node: ast.AST) -> str | None:
        return self.imports.resolve(node)

    @cached_property
    def _index(self) -> tuple[dict[type, list[ast.AST]], dict[int, ast.AST]]:
        """Nodes by type (in source order) and each node's parent, from the file's one walk."""
        if self.tree_index is None:
            self.tree_index = TreeIndex(self.tree)
        return self.tree_index.by_type, self.tree_index.parents

    @cached_property
    def dataparallel_calls(self) -> list[ast.Call]:
        """`nn.DataParallel(...)` constructions in this file."""
        if "DataParallel" not in self.source.text:
            return []
        names = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                 "torch.nn.parallel.data_parallel.DataParallel")
        return [n for n in self.nodes(ast.Call) if (self.resolve(n.func) or "") in names]

    @cached_property
    def module_level_values(self) -> dict[str, list[ast.AST]]:
        values: dict[str, list[ast.AST]] = {}
        for stmt in self.tree.body:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    _bind(target, stmt.value, values)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                _bind(stmt.target, stmt.value, values)
        return values

    @cached_property
    def module_functions(self) -> list[FunctionInfo]:
        self._index  # noqa: B018 - make sure the tree index exists
        return [FunctionInfo(n, None, self.tree_index) for n in self.nodes(ast.FunctionDef, ast.AsyncFunctionDef)]

    def class_is_module(self, name: str) -> tuple[bool, frozenset[str]]:
        """(certainly a module, or else the unresolved names any one of which would make it one)."""
        return self.module_status.get(name, (False, frozenset()))

    def callee_module_status(self, call: ast.AST) -> tuple[bool, frozenset[str]]:
        """Is ``call`` a construction of an nn.Module? (sure, or conditions on the index)."""
        if not isinstance(call, ast.Call):
            return False, frozenset()
        name = self.resolve(call.func)
        if is_torch_nn_class(name):
            return True, frozenset()
        if name and name.startswith(self.module + "."):
            local = name[len(self.module) + 1:]
            if local in self.classes:
                return self.class_is_module(local)
            return False, frozenset()
        if name and name.rsplit(".", 1)[-1][:1].isupper() and not name.startswith(
                ("torch.", "builtins.", "collections.", "typing.")):
            return False, frozenset({name})
        return False, frozenset()


class ModelClass:
    """An nn.Module subclass seen with its in-file bases: attributes and forward-reachable code."""

    def __init__(self, ctx: FileContext, info: ClassInfo, requires: frozenset[str]):
        self.ctx = ctx
        self.info = info
        # Non-empty when module-ness depends on a base defined in another file.
        self.requires = requires
        self.mro = self._linearize(info)
        self._functions: dict[int, FunctionInfo] = {}

    @property
    def name(self) -> str:
        return self.info.name

    def _linearize(self, info: ClassInfo) -> list[ClassInfo]:
        order: list[ClassInfo] = []
        stack = [info]
        while stack:
            cur = stack.pop(0)
            if cur in order:
                continue
            order.append(cur)
            for base in cur.bases:
                local = base[len(self.ctx.module) + 1:] if base.startswith(self.ctx.module + ".") else None
                if local and local in self.ctx.classes:
                    stack.append(self.ctx.classes[local])
        return order

    def function(self, node: FunctionNode, owner: ClassInfo | None) -> FunctionInfo:
        info = self._functions.get(id(node))
        if info is None:
            info = self._functions[id(node)] = FunctionInfo(node, owner, self.ctx.tree_index)
        return info

    def find_method(self, name: str, after: ClassInfo | None = None) -> FunctionInfo | None:
        mro = self.mro
        if after is not None and after in mro:
            mro = mro[mro.index(after) + 1:]
        for cls in mro:
            if name in cls.methods:
                return self.function(cls.methods[name], cls)
        return None

    def has_property(self, name: str) -> bool:
        return any(name in cls.properties for cls in self.mro)

    @cached_property
    def all_methods(self) -> list[FunctionInfo]:
        seen: dict[str, FunctionInfo] = {}
        for cls in self.mro:
            for name, node in cls.methods.items():
                seen.setdefault(name, self.function(node, cls))
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
        seen: dict[int, FunctionInfo] = {}
        work = list(roots)
        while work:
            fn = work.pop(0)
            if id(fn.node) in seen:
                continue
            seen[id(fn.node)] = fn
            for node in fn.nodes(ast.Attribute):
                attr = fn.self_attr(node)
                if attr is not None:
                    target = self.find_method(attr)
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
        """Reachable code minus the hooks (DP104 owns what hooks write)."""
        hooks = {id(h.node) for h in self.hooks}
        return [fn for fn in self.reachable if id(fn.node) not in hooks]

    def is_reachable(self, fn: FunctionInfo) -> bool:
        return any(r.node is fn.node for r in self.reachable)

    @cached_property
    def hooks(self) -> list[FunctionInfo]:
        """Hook functions the class registers on itself or its children (any method)."""
        found: list[FunctionInfo] = []
        for fn in self.all_methods:
            for call in fn.nodes(ast.Call):
                func = call.func
                if not (isinstance(func, ast.Attribute) and func.attr.startswith("register_")
                        and func.attr.endswith("hook") and call.args):
                    continue
                receiver = func.value
                if not (fn.is_self(receiver) or _rooted_at_self(receiver, fn)):
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
        for fn in self.all_methods:
            if id(fn.node) in reachable:
                continue
            for node in fn.nodes(ast.Assign, ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if node.value is None:
                    continue
                for target in targets:
                    for name, value in _self_bindings(target, node.value, fn):
                        fact = facts.setdefault(name, AttrFacts())
                        kind, elements, requires = self.classify(value, fn)
                        fact.kinds.add(kind)
                        fact.element_kinds |= elements
                        fact.requires |= requires
                        fact.assignments.append((target, value, fn))
            for call in fn.nodes(ast.Call):
                self._record_call(call, fn, facts)
        return facts

    def _record_call(self, call: ast.Call, fn: FunctionInfo, facts: dict[str, AttrFacts]) -> None:
        func = call.func
        if not isinstance(func, ast.Attribute):
            if isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) == 3 \
                    and fn.is_self(call.args[0]) and isinstance(call.args[1], ast.Constant) \
                    and isinstance(call.args[1].value, str):
                fact = facts.setdefault(call.args[1].value, AttrFacts())
                kind, elements, requires = self.classify(call.args[2], fn)
                fact.kinds.add(kind)
                fact.element_kinds |= elements
                fact.requires |= requires
            return
        registered = {"register_buffer": "buffer", "register_parameter": "parameter",
                      "add_module": "module", "register_module": "module"}.get(func.attr)
        if registered and fn.is_self(func.value) and call.args \
                and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
            facts.setdefault(call.args[0].value, AttrFacts()).kinds.add(registered)
            return
        # self.layers.append(nn.Linear(...)) in __init__ fills a plain list with modules.
        attr = fn.self_attr(func.value)
        if attr is not None and func.attr in {"append", "extend", "insert", "add", "update",
                                              "setdefault", "appendleft"} and call.args:
            value = call.args[-1]
            fact = facts.setdefault(attr, AttrFacts())
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
        if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            elements, requires = set(), set()
            for elt in value.elts:
                kind, _, req = self.classify(elt, fn)
                elements.add(kind)
                requires |= req
            return "container", elements, requires
        if isinstance(value, ast.Dict):
            elements, requires = set(), set()
            for elt in value.values:
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
        if isinstance(value.func, ast.Attribute) and value.func.attr in _TENSOR_METHODS:
            inner, elements, req = self.classify(value.func.value, fn)
            if inner in ("tensor", "scalar_tensor", "module", "parameter"):
                return ("tensor" if inner == "scalar_tensor" else inner), elements, req
        return "other", set(), set()


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool))


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


def collect_classes(tree: ast.Module, imports: ImportMap, module: str,
                    class_nodes: list[ast.ClassDef] | None = None) -> dict[str, ClassInfo]:
    classes: dict[str, ClassInfo] = {}
    if class_nodes is None:
        class_nodes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for node in class_nodes:
        bases = tuple(b for b in (imports.resolve(base.func if isinstance(base, ast.Call) else
                                                  (base.value if isinstance(base, ast.Subscript) else base))
                                  for base in node.bases) if b)
        methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        properties: set[str] = set()
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[stmt.name] = stmt
                if any(dotted(d) in ("property", "functools.cached_property", "cached_property")
                       for d in stmt.decorator_list):
                    properties.add(stmt.name)
        # Nested classes keep their simple name; a clash keeps the first (rare in model code).
        classes.setdefault(node.name, ClassInfo(node, f"{module}.{node.name}", bases, methods,
                                                frozenset(properties)))
    return classes


def module_status(classes: dict[str, ClassInfo], module: str) -> dict[str, tuple[bool, frozenset[str]]]:
    """For each class: (is a module for sure, else the outside names that could make it one)."""
    status: dict[str, tuple[bool, frozenset[str]]] = {}

    def visit(name: str, trail: frozenset[str]) -> tuple[bool, frozenset[str]]:
        if name in status:
            return status[name]
        if name in trail:
            return False, frozenset()
        unresolved: set[str] = set()
        for base in classes[name].bases:
            if base in MODULE_BASES or is_torch_nn_class(base):
                status[name] = (True, frozenset())
                return status[name]
            local = base[len(module) + 1:] if base.startswith(module + ".") else None
            if local is not None and local in classes:
                sure, needs = visit(local, trail | {name})
                if sure:
                    status[name] = (True, frozenset())
                    return status[name]
                unresolved |= needs
            elif not (base.startswith(_NEVER_MODULE_ROOTS) or base.rsplit(".", 1)[-1] in _NEVER_MODULE
                      or base.startswith("torch.")):
                unresolved.add(base)
        status[name] = (False, frozenset(unresolved))
        return status[name]

    for name in classes:
        visit(name, frozenset())
    return status


def parameters_of(fn: FunctionInfo) -> list[str]:
    """Names of the function's parameters other than self."""
    args = fn.node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if args.vararg:
        names.append(args.vararg.arg)
    if args.kwarg:
        names.append(args.kwarg.arg)
    return names[1:] if names and names[0] == fn.self_name and fn.owner is not None else names


_RESHAPERS = frozenset({"transpose", "permute", "t", "T", "swapaxes", "swapdims", "movedim", "mT"})


def batch_derived(fn: FunctionInfo) -> dict[str, bool]:
    """Local names computed from forward's inputs: name -> still batch-major (no transpose seen).

    Inputs to a DataParallel-wrapped forward are chunks along dim 0, so a value computed
    from them without a transpose keeps the batch in dim 0.
    """
    cached = fn.__dict__.get("_batch_derived")
    if cached is not None:
        return cached
    derived: dict[str, bool] = {p: True for p in parameters_of(fn)}
    assigns = sorted(fn.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign), key=lambda n: (n.lineno, n.col_offset))
    for node in assigns:
        value = node.value
        if value is None:
            continue
        names = [n.id for n in ast.walk(value) if isinstance(n, ast.Name)]
        sources = [derived[n] for n in names if n in derived]
        if not sources:
            continue
        batch_major = all(sources) and not any(
            (isinstance(n, ast.Attribute) and n.attr in _RESHAPERS) for n in ast.walk(value))
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Name):
                    derived[t.id] = batch_major
    fn.__dict__["_batch_derived"] = derived
    return derived


def is_batch_tensor(node: ast.AST, fn: FunctionInfo) -> bool:
    """A forward-input-derived, batch-major expression (conservative: names and method chains)."""
    derived = batch_derived(fn)
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
        # `scale * x`, `x / t`: elementwise with a scalar or a broadcast keeps the batch dim.
        return is_batch_tensor(node.left, fn) or is_batch_tensor(node.right, fn)
    base = node
    while isinstance(base, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(base, ast.Attribute) and (base.attr in _RESHAPERS or base.attr in ("weight", "bias")):
            return False  # transposed, or a layer's weights (a module passed in is not data)
        if isinstance(base, ast.Subscript):
            return False  # indexing may drop or move the batch dim
        base = base.func if isinstance(base, ast.Call) else base.value
    return isinstance(base, ast.Name) and derived.get(base.id, False)


def rnn_kind(model: ModelClass, attr: str | None) -> str | None:
    """'LSTM'/'GRU'/'RNN'/'Transformer…' when self.<attr> is built from that torch.nn class."""
    if attr is None:
        return None
    facts = model.attrs.get(attr)
    if facts is None:
        return None
    for _, value, _ in facts.assignments:
        if isinstance(value, ast.Call):
            name = model.ctx.resolve(value.func) or ""
            if name.startswith("torch.nn."):
                return name.rsplit(".", 1)[-1]
    return None


def keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def under_lazy_guard(fn, node) -> bool:
    """Inside `if self.x is None:` / `if not self.x:` / `if not hasattr(self, ...)`."""
    cur = fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, ast.If):
            for test in ast.walk(cur.test):
                if isinstance(test, ast.Compare) and fn.self_attr(test.left) is not None and any(
                        isinstance(c, ast.Constant) and c.value is None for c in test.comparators):
                    return True
                if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and (
                        fn.self_attr(test.operand) is not None or (
                        isinstance(test.operand, ast.Call) and isinstance(test.operand.func, ast.Name)
                        and test.operand.func.id == "hasattr")):
                    return True
        cur = fn.parent(cur)
    return False
