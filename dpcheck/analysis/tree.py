"""One walk per file: the node index, and per-function views of it that rules query."""

from __future__ import annotations

import ast
import os
import re
import sys
from bisect import bisect_left
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from dpcheck.analysis.torch_api import FunctionNode
from dpcheck.record import field, record

if TYPE_CHECKING:
    from dpcheck.analysis.classes import ClassInfo

T = TypeVar("T")


class cached_property:  # noqa: N801 - a drop-in for functools.cached_property
    """``functools.cached_property`` without its lock: on Python 3.11 every first read of a fact
    takes a per-property RLock (2% of a cold run); the analysis of a file runs in one thread.
    The value goes into the instance's ``__dict__``, which later reads find first."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func
        self.attrname: str | None = None
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.attrname = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)
        return value

# Fields that hold only shared singletons (Load/Store, operators): never walked.
_SINGLETON_FIELDS = frozenset({"ctx", "op", "ops"})
# Grammar (ASDL) types of fields that never hold a node: names, strings, constants, flags.
# Not reading them at all is a fifth of the walk (every Name, Attribute, Constant has one).
_LEAF_TYPES = frozenset({"identifier", "string", "constant", "int"})
# Node class -> its fields that may hold nodes, in order (for ``_walk_with_stack``).
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    """The fields of ``cls`` that may hold nodes; every field but the singletons' when its
    signature cannot be read (the walks check what they meet)."""
    declared = _declared_fields(cls)
    if declared is None:
        declared = [(name, "") for name in cls._fields or ()]
    fields = _FIELDS[cls] = tuple(name for name, kind in declared
                                  if name not in _SINGLETON_FIELDS and kind.rstrip("?*") not in _LEAF_TYPES)
    return fields


def _declared_fields(cls: type) -> list[tuple[str, str]] | None:
    """(field, grammar type with its ?/* mark) for each field, from the class's signature line,
    its docstring (`Call(expr func, expr* args, keyword* keywords)`; `Pass` has none); None
    when that line does not declare exactly the class's fields (deprecated aliases: ``ast.Num``)."""
    signature = re.fullmatch(r"\w+(?:\((.*)\))?", (cls.__doc__ or "").split("\n", 1)[0])
    if signature is None:
        return None
    declared = [tuple(spec.rsplit(" ", 1)[::-1]) for spec in signature.group(1).split(", ")] \
        if signature.group(1) else []
    return declared if [name for name, _ in declared] == list(cls._fields or ()) else None


# Fields of statements that hold statements (or handlers and match cases, which hold them).
_STATEMENT_FIELDS = ("body", "handlers", "orelse", "finalbody", "cases")
# Node class -> its statement fields, reversed (the order they go on the stack); most statements
# (expressions, assignments, returns) have none and cost no field lookup at all.
_STATEMENT_FIELDS_OF: dict[type, tuple[str, ...]] = {}
_WALK_RESULTS = frozenset({"order", "parents", "position", "size", "by_type"})

# A field of each node, read in C: `map(id_of, ctx.nodes(ast.Name))` reads every name of a file
# without a Python call per node.
id_of = attrgetter("id")
attr_of = attrgetter("attr")
value_of = attrgetter("value")


def statement_nodes(tree: ast.AST) -> dict[type, list[ast.AST]]:
    """Statements (and except handlers, match cases) by type, in the preorder ``TreeIndex``
    gives them: what a file's imports and classes need, without walking any expression
    (a tenth of the nodes)."""
    found: dict[type, list[ast.AST]] = {}
    fields_of = _STATEMENT_FIELDS_OF
    stack = [tree]
    while stack:
        node = stack.pop()
        kind = node.__class__
        if kind in found:
            found[kind].append(node)
        else:
            found[kind] = [node]
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in reversed(_STATEMENT_FIELDS) if f in (kind._fields or ()))
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                stack.extend(reversed(value))
    return found


# The walk is the hot loop of every file (a node at a time). It is generated Python: one
# visitor per node class that reads that class's node-holding fields by name, as the grammar
# declares them (a list, an optional node, a node), instead of looping over field names with
# getattr and testing what each holds: a third less time than the generic recursive walk. A leaf
# child (Name, Constant: two nodes in five) is recorded inline, without a call. A node's parent is
# kept as the position of the parent. The walk returns (preorder, parent positions, subtree
# sizes, nodes by type).
def _node_classes() -> list[type]:
    """Every concrete node class of this Python's ``ast`` module."""
    found: list[type] = []
    pending = [ast.AST]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                pending.append(sub)
    return [c for c in found if c.__module__ == "ast" and c._fields is not None]


def _visitors_source() -> tuple[str, list[type]]:
    """The source of ``_make_visitors`` and the node classes it indexes (``C``)."""
    classes: list[type] = []
    walked: dict[type, list[tuple[str, str]]] = {}
    for cls in _node_classes():
        declared = _declared_fields(cls)
        if declared is None:
            continue
        classes.append(cls)
        walked[cls] = [(name, kind[-1:] if kind[-1:] in "?*" else "") for name, kind in declared
                       if name not in _SINGLETON_FIELDS and kind.rstrip("?*") not in _LEAF_TYPES]

    def visit_child(indent: str) -> list[str]:
        return [f"{indent}kind = child.__class__",
                f"{indent}record = leaves.get(kind)",
                f"{indent}if record is not None:",
                f"{indent}    add(child); add_up(here); add_size(1); record(child)",
                f"{indent}else:",
                f"{indent}    visitors[kind](child, here)"]

    # Each class's list in ``by_type`` is made up front and its ``append`` bound once per walk
    # (the empty ones are dropped at the end); ``leaves`` maps a leaf class to its list's append.
    lines = ["def _make_visitors(order, up, size, by_type, visitors, leaves, C):",
             "    add, add_up, add_size = order.append, up.append, size.append"]
    for i, cls in enumerate(classes):
        lines.append(f"    by_type[C[{i}]] = nodes_{i} = []")
        if not walked[cls]:
            lines.append(f"    leaves[C[{i}]] = nodes_{i}.append")
    for i, cls in enumerate(classes):
        if not walked[cls]:
            continue
        lines += [f"    record_{i} = nodes_{i}.append",
                  f"    def visit_{cls.__name__}(node, here):",
                  "        parent, here = here, len(order)",
                  "        add(node); add_up(parent); add_size(1)",
                  f"        record_{i}(node)"]
        for name, mark in walked[cls]:
            if mark == "*":  # a list: of nodes, or None where the grammar allows it (`{**d}`'s key)
                lines += [f"        for child in node.{name}:", "            if child is not None:"]
                lines += visit_child(" " * 16)
            elif mark == "?":
                lines += [f"        child = node.{name}", "        if child is not None:"]
                lines += visit_child(" " * 12)
            else:
                lines += [f"        child = node.{name}"]
                lines += visit_child(" " * 8)
        lines += ["        size[here] = len(order) - here",
                  f"    visitors[C[{i}]] = visit_{cls.__name__}"]
    return "\n".join(lines) + "\n", classes


# (``_make_visitors``, the classes it indexes) once ``prepare_walk`` has compiled them.
_VISITORS: tuple[Callable, list[type]] | None = None


def prepare_walk() -> None:
    """Make the generated walk for this process. Compiling its source takes 40 to 70 ms, a
    third of a one-file run, so only runs of many files call this (``engine.analyze_selected``,
    before the pool forks: the workers inherit it); until then trees are walked by hand
    (``_walk_with_stack``: the same results, a little slower per node). The compiled code is
    kept beside this module's own bytecode (``_compiled_walk``), so a later run reads it back."""
    _visitors()


def _visitors() -> tuple[Callable, list[type]]:
    global _VISITORS
    if _VISITORS is None:
        source, classes = _visitors_source()
        namespace: dict[str, Any] = {}
        exec(_compiled_walk(source), namespace)  # noqa: S102 - generated here
        _VISITORS = namespace["_make_visitors"], classes
    return _VISITORS


# The file name the generated walk's code is kept under, as if it were a module beside this one
# (``importlib.util.cache_from_source`` then places it as Python places bytecode: __pycache__, the
# interpreter's tag, PYTHONPYCACHEPREFIX).
_WALK_CODE_NAME = "_generated_walk.py"
_WALK_FILENAME = "<dpcheck.analysis.tree visitors>"


def _compiled_walk(source: str):
    """The code of the generated walk's ``source``: read back from the file an earlier run kept
    it in when that run generated the same source on this same interpreter (``sys.version``),
    else compiled and kept there (unless bytecode writing is off, as for Python's own, or the
    folder cannot be written: then it is compiled again next time). Reading it back takes under
    a millisecond, compiling it 40 to 70 ms: a cold run over many files waits for it before its
    workers start."""
    import importlib.util
    import marshal

    try:
        path = importlib.util.cache_from_source(os.path.join(os.path.dirname(__file__), _WALK_CODE_NAME))
    except (NotImplementedError, ValueError):  # no bytecode cache on this interpreter
        path = None
    if path is not None:
        try:
            with open(path, "rb") as handle:
                version, kept_source, code = marshal.load(handle)
            if version == sys.version and kept_source == source:
                return code
        except (OSError, EOFError, ValueError, TypeError):
            pass  # none kept yet, or unreadable: compiled below
    code = compile(source, _WALK_FILENAME, "exec")
    if path is not None and not sys.dont_write_bytecode:
        _keep(path, marshal.dumps((sys.version, source, code)))
    return code


def _keep(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (a temporary file renamed over it), as
    Python writes bytecode; a folder that cannot be written is left alone."""
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def _walk_recursively(tree: ast.AST):
    """The walk, one visitor call per node that holds nodes. Raises RecursionError for nesting
    deeper than the call stack, and KeyError or AttributeError for a node class it has no visitor
    for or a node lacking one of its fields (a tree built by hand): ``_walk_with_stack`` takes those."""
    order: list[ast.AST] = []
    up: list[int] = []
    size: list[int] = []
    by_type: dict[type, list[ast.AST]] = {}
    visitors: dict[type, Callable] = {}
    leaves: dict[type, Callable] = {}
    make_visitors, classes = _visitors()
    make_visitors(order, up, size, by_type, visitors, leaves, classes)
    try:
        kind = tree.__class__
        record = leaves.get(kind)
        if record is not None:
            order.append(tree)
            up.append(-1)
            size.append(1)
            record(tree)
        else:
            visitors[kind](tree, -1)
    finally:
        # The visitors refer to each other through ``visitors``: a cycle that would keep them (and
        # through their cells every node) alive until the cyclic collector runs.
        visitors.clear()
    return order, up, size, {kind: nodes for kind, nodes in by_type.items() if nodes}


def _walk_with_stack(tree: ast.AST):
    order: list[ast.AST] = []
    up: list[int] = []
    stack: list[tuple[ast.AST, int]] = [(tree, -1)]
    node_type = ast.AST
    while stack:
        node, parent = stack.pop()
        here = len(order)
        order.append(node)
        up.append(parent)
        fields = _FIELDS.get(node.__class__)
        for name in reversed(_fields(node.__class__) if fields is None else fields):
            value = getattr(node, name, None)
            if value.__class__ is list:
                stack.extend((child, here) for child in reversed(value) if isinstance(child, node_type))
            elif isinstance(value, node_type):
                stack.append((value, here))
    size = [1] * len(order)
    for i in range(len(order) - 1, 0, -1):
        size[up[i]] += size[i]
    by_type: dict[type, list[ast.AST]] = {}
    for node in order:
        by_type.setdefault(node.__class__, []).append(node)
    return order, up, size, by_type


class TreeIndex:
    """One preorder walk of a file: every node in order, each node's parent, and subtree spans.

    A subtree is a contiguous slice of the preorder list, so a function's nodes are
    found without walking it again. The walk runs when one of its results is first read:
    a file where no rule looks below the statements (no model class, no script) never pays it.
    """

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        # Node type -> the preorder positions of its ``by_type`` nodes (ascending), made on demand.
        self._type_positions: dict[type, list[int]] = {}

    def __getattr__(self, name: str):
        # Only called for attributes not yet set: the walk's results before the walk.
        if name not in _WALK_RESULTS:
            raise AttributeError(name)
        self._walk()
        return self.__dict__[name]

    def _walk(self) -> None:
        try:
            if _VISITORS is None:  # a run of a few files: not worth compiling the generated walk
                raise LookupError
            order, up, size, by_type = _walk_recursively(self.tree)
        except (RecursionError, LookupError, AttributeError):
            # Nesting deeper than Python's call stack, or a tree built by hand: the same walk by
            # hand, reading any field that is there.
            order, up, size, by_type = _walk_with_stack(self.tree)
        self.order = order
        # Keyed by the nodes themselves (they hash by identity): no id() int to make per node, to
        # hash, and to free with the file, and a lookup is one call less.
        self.position: dict[ast.AST, int] = dict(zip(order, range(len(order))))
        self.parents = _Parents(self.position, order, up)
        self.size = size
        self.by_type = by_type

    def statements_by_type(self) -> dict[type, list[ast.AST]]:
        """Nodes by type, statements among them: the walk's ``by_type`` once the walk has run, else
        ``statement_nodes`` of the tree (a question about imports does not start the whole walk)."""
        return self.by_type if "order" in self.__dict__ else statement_nodes(self.tree)

    def subtree(self, node: ast.AST) -> list[ast.AST]:
        """``node`` and everything under it, in preorder."""
        start = self.position[node]
        return self.order[start:start + self.size[start]]

    def contains(self, outer: ast.AST, node: ast.AST) -> bool:
        """Is ``node`` in the subtree of ``outer`` (``outer`` itself included)?"""
        start, here = self.position.get(outer), self.position.get(node)
        return start is not None and here is not None and start <= here < start + self.size[start]

    def nodes_within(self, node: ast.AST, node_type: type) -> list[ast.AST]:
        """The nodes of ``node_type`` in ``node``'s subtree (itself included), in preorder."""
        start = self.position[node]
        return self.nodes_between(node_type, start, start + self.size[start])

    def nodes_between(self, node_type: type, start: int, end: int) -> list[ast.AST]:
        """The nodes of ``node_type`` at preorder positions ``start`` to ``end`` (excluded), in order."""
        nodes = self.by_type.get(node_type)
        if not nodes:
            return []
        positions = self._type_positions.get(node_type)
        if positions is None:
            position = self.position
            # map() keeps the loop in C: a type's positions are asked for over the whole file.
            positions = self._type_positions[node_type] = list(map(position.__getitem__, nodes))
        return nodes[bisect_left(positions, start):bisect_left(positions, end)]



class _Parents:
    """Node -> its parent node (``dict``'s reading interface), from the walk's parent positions:
    building a dict of every node's parent cost an eighth of the walk, for the few nodes asked about.
    It holds the walk's lists, not the ``TreeIndex`` (which holds it: a reference cycle)."""

    __slots__ = ("_position", "_order", "_up")

    def __init__(self, position: dict[ast.AST, int], order: list[ast.AST], up: list[int]) -> None:
        self._position, self._order, self._up = position, order, up

    def get(self, node: ast.AST, default: Any = None) -> Any:
        at = self._position.get(node)
        if not at:  # not in this tree (None), or its root (0)
            return default
        return self._order[self._up[at]]

    def __getitem__(self, node: ast.AST) -> ast.AST:
        parent = self.get(node)
        if parent is None:
            raise KeyError(node)
        return parent

    def __contains__(self, node: ast.AST) -> bool:
        return bool(self._position.get(node))


class _Indexed:
    """`nodes(*types)` and `parent(node)` over an ``_index`` (nodes by type, parents) built once,
    and `fact(compute)`: derived facts computed once per object, kept in its own ``_facts``."""

    _facts: dict

    def fact(self, compute: Callable[[Any], T]) -> T:
        """``compute(self)``, computed once: the one memo for facts helpers derive from a
        file or a function (keyed by the computing function)."""
        facts = self._facts
        if compute not in facts:
            facts[compute] = compute(self)
        return facts[compute]

    def drop_facts(self) -> None:
        """Forget the memoised facts (once the file's analysis is done: see ``analyze_source``)."""
        self._facts.clear()

    def nodes(self, *types: type) -> Sequence[ast.AST]:
        """All nodes of the given types, in source order per type (to read, never to change:
        one type's nodes are the index's own list, not a copy)."""
        by_type = self._index[0]
        if len(types) == 1:  # most asks: no generator to resume once per node
            found = by_type.get(types[0])
            return self._nodes_not_indexed(types[0]) if found is None else found
        found_all: list[ast.AST] = []
        for t in types:
            found = by_type.get(t)
            found_all += self._nodes_not_indexed(t) if found is None else found
        return found_all

    def _nodes_not_indexed(self, node_type: type) -> list[ast.AST]:
        """The nodes of a type ``_index`` has no entry for (none, unless a subclass indexes lazily)."""
        return []

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self._index[1].get(node)

    def enclosing(self, node: ast.AST, kinds: type | tuple[type, ...]) -> ast.AST | None:
        """The nearest ancestor of ``node`` (not ``node`` itself) that is one of ``kinds``, or None."""
        parents = self._index[1]
        cur = parents.get(node)
        while cur is not None and not isinstance(cur, kinds):
            cur = parents.get(cur)
        return cur


@record
class FunctionInfo(_Indexed):
    """One function body with indexes that rules query instead of re-walking it."""

    node: FunctionNode
    owner: "ClassInfo | None"
    tree_index: "TreeIndex | None" = None
    _facts: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")

    @cached_property
    def self_name(self) -> str:
        args = self.node.args.posonlyargs + self.node.args.args
        return args[0].arg if args else "self"

    @cached_property
    def _index(self) -> tuple[dict[type, list[ast.AST]], _Parents]:
        # Nodes by type are filled per type when first asked (see _nodes_not_indexed).
        return {}, self._body_span[0].parents

    @cached_property
    def _body_span(self) -> tuple[TreeIndex, int, int]:
        """The body's statements (not the signature or decorators) as a span of the file's one
        walk: sibling statements' subtrees are adjacent in preorder, so the body runs from its
        first statement to the end of its last. A function met on its own gets a walk of its own."""
        index = self.tree_index
        if index is None or self.node not in index.position:
            index = TreeIndex(self.node)
        body = self.node.body if isinstance(self.node.body, list) else [self.node.body]
        if not body:
            return index, 0, 0
        last = index.position[body[-1]]
        return index, index.position[body[0]], last + index.size[last]

    def _nodes_not_indexed(self, node_type: type) -> list[ast.AST]:
        # Sliced from the file's list of that type, rather than sorting every node of the body
        # into lists of its own when most types are never asked for.
        index, start, end = self._body_span
        found = self._index[0][node_type] = index.nodes_between(node_type, start, end)
        return found

    def nodes_under(self, node: ast.AST, node_type: type) -> list[ast.AST]:
        """The nodes of ``node_type`` in ``node``'s subtree (itself included), sliced from the
        walk instead of walking it again; a node the walk never met (one built on the fly, as
        ``local_values`` builds ``x + y`` for ``x += y``) is walked on its own (then not in preorder)."""
        index = self._body_span[0]
        start = index.position.get(node)
        if start is None:
            return [n for n in ast.walk(node) if isinstance(n, node_type)]
        # The subtree's slice, filtered: the subtrees asked about are small (an assigned value, a
        # target), so this beats the per-type lists, whose positions cost a pass over the file.
        return [n for n in index.order[start:start + index.size[start]] if n.__class__ is node_type]

    def is_self(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == self.self_name

    def self_attr(self, node: ast.AST) -> str | None:
        """``X`` for ``self.X`` (``names.self_attr`` with this function's first parameter), inline:
        asked of most attributes and targets the rules meet."""
        if isinstance(node, ast.Attribute):
            value = node.value
            if isinstance(value, ast.Name) and value.id == self.self_name:
                return node.attr
        return None

    @cached_property
    def local_values(self) -> dict[str, list[ast.AST]]:
        """Local name -> every expression assigned to it in this body (augmented ones too)."""
        values: dict[str, list[ast.AST]] = {}
        for node in self.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):  # most targets: `_bind`'s first case, inline
                        values.setdefault(target.id, []).append(node.value)
                    else:
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
            if node.value is not None and self.enclosing(node, FunctionNode) is self.node:
                yield node.value
        if isinstance(self.node, ast.Lambda):
            yield self.node.body


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


