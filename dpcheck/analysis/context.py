"""One parsed file: source, tree, imports, classes, and the per-file facts rules share."""

from __future__ import annotations

import ast
from collections.abc import Callable

from dpcheck.analysis.classes import ClassInfo
from dpcheck.analysis.names import ImportMap
from dpcheck.analysis.source import SourceFile
from dpcheck.analysis.torch_api import FUNCTION_DEFS, is_torch_nn_class
from dpcheck.analysis.tree import FunctionInfo, TreeIndex, _bind, _Indexed, _Parents, cached_property
from dpcheck.analysis.tree import attr_of as _attr_of
from dpcheck.analysis.tree import id_of as _id_of
from dpcheck.constants import DATAPARALLEL_CLASSES
from dpcheck.record import field, record


class _ResolvedNames(dict):
    """Node -> its dotted name (``ImportMap.resolve``), computed when first looked up. Every
    rule resolves the calls of forward-reachable code again: a name already asked is found by
    the dictionary's own lookup, with no Python call (about a million a cold run of a model
    library). Keyed by the node itself (nodes hash by identity): the entry keeps its node alive,
    so no other node can take its place."""

    __slots__ = ("_resolve",)

    def __init__(self, resolve) -> None:
        super().__init__()
        self._resolve = resolve

    def __missing__(self, node: ast.AST) -> str | None:
        name = self[node] = self._resolve(node)
        return name


@record
class FileContext(_Indexed):
    """One parsed file: its tree, imports, source and module classes."""

    source: SourceFile
    tree: ast.Module
    module: str
    imports: ImportMap
    classes: dict[str, ClassInfo] = field(default_factory=dict)  # by simple name, in-file
    module_status: dict[str, tuple[bool, frozenset[str]]] = field(default_factory=dict)
    tree_index: TreeIndex | None = None
    _facts: dict = field(default_factory=dict, repr=False, compare=False)
    _functions: dict = field(default_factory=dict, repr=False, compare=False)
    _named_calls: dict = field(default_factory=dict, repr=False, compare=False)

    def function(self, node: ast.AST, owner: ClassInfo | None) -> FunctionInfo:
        """The one ``FunctionInfo`` of a function node of this file: every model class that
        inherits an in-file base's method shares its indexes and facts (they depend on the
        function alone), instead of each subclass computing them again."""
        info = self._functions.get(id(node))
        if info is None or info.node is not node:
            info = self._functions[id(node)] = FunctionInfo(node, owner, self.tree_index)
        return info

    @cached_property
    def resolve(self) -> Callable[[ast.AST], str | None]:
        """``resolve(node)``: the dotted name of a Name/Attribute chain (``ImportMap.resolve``),
        remembered per node (see ``_ResolvedNames``)."""
        return _ResolvedNames(self.imports.resolve).__getitem__

    def named_calls(self, fn: FunctionInfo) -> list[tuple[ast.Call, str]]:
        """(call, its callee's dotted name or "") for every call in ``fn``'s body, in order: most
        class rules loop over the calls of forward's code by name, so they are named once per
        function for all of them."""
        known = self._named_calls.get(id(fn.node))
        if known is not None and known[0] is fn.node:
            return known[1]
        resolve = self.resolve
        named = [(call, resolve(call.func) or "") for call in fn.nodes(ast.Call)]
        self._named_calls[id(fn.node)] = (fn.node, named)
        return named

    @cached_property
    def _index(self) -> tuple[dict[type, list[ast.AST]], _Parents]:
        """Nodes by type (in source order) and each node's parent, from the file's one walk."""
        if self.tree_index is None:
            self.tree_index = TreeIndex(self.tree)
        return self.tree_index.by_type, self.tree_index.parents

    @cached_property
    def dataparallel_calls(self) -> list[ast.Call]:
        """`nn.DataParallel(...)` constructions in this file."""
        if "DataParallel" not in self.source.text:
            return []
        return [n for n in self.nodes(ast.Call) if (self.resolve(n.func) or "") in DATAPARALLEL_CLASSES]

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
    def module_functions(self) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions the module defines at its top level, by name (the last definition of a
        name, as Python binds it)."""
        return {stmt.name: stmt for stmt in self.tree.body if isinstance(stmt, FUNCTION_DEFS)}

    def class_is_module(self, name: str) -> tuple[bool, frozenset[str]]:
        """(certainly a module, or else the unresolved names any one of which would make it one)."""
        return self.module_status.get(name, (False, frozenset()))

    def local_name(self, dotted: str | None) -> str | None:
        """The in-file name a resolved dotted name of this module has (`pkg.model.Net` in
        pkg/model.py: `Net`), or None for a name of another module."""
        if dotted and dotted.startswith(self.module + "."):
            return dotted[len(self.module) + 1:]
        return None

    def in_file_mro(self, info: ClassInfo) -> list[ClassInfo]:
        """``info`` and the bases of it defined in this file, nearest first (what a method of the
        class may find on ``self``, as far as this file shows)."""
        order: list[ClassInfo] = []
        stack = [info]
        while stack:
            cur = stack.pop(0)
            if cur in order:
                continue
            order.append(cur)
            for base in cur.bases:
                local = self.local_name(base)
                if local and local in self.classes:
                    stack.append(self.classes[local])
        return order

    def callee_module_status(self, call: ast.AST) -> tuple[bool, frozenset[str]]:
        """Is ``call`` a construction of an nn.Module? (sure, or conditions on the index)."""
        if not isinstance(call, ast.Call):
            return False, frozenset()
        name = self.resolve(call.func)
        if is_torch_nn_class(name):
            return True, frozenset()
        local = self.local_name(name)
        if local is not None:
            if local in self.classes:
                return self.class_is_module(local)
            return False, frozenset()
        if name and name.rsplit(".", 1)[-1][:1].isupper() and not name.startswith(
                ("torch.", "builtins.", "collections.", "typing.")):
            return False, frozenset({name})
        return False, frozenset()


def code_names(ctx: FileContext) -> str:
    """The names the file's code spells, one a line: its names and attribute names, its import
    targets and its own module. Every dotted name ``resolve`` gives is made of these, so a word
    in no line here is in no resolved name and no attribute: rules ask this (``word in
    ctx.fact(code_names)``) before walking classes for calls that most files never make. A tenth
    the size of the text, and without its strings and comments; identifiers as Python reads them."""
    names = set(map(_attr_of, ctx.nodes(ast.Attribute)))
    names.update(map(_id_of, ctx.nodes(ast.Name)))
    names.update(ctx.imports.aliases.values())
    names.add(ctx.module)
    return "\n".join(names)
