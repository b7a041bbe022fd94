"""The classes of one file: their resolved bases, methods, and which are nn.Modules."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from dpcheck.analysis.names import ImportMap, dotted
from dpcheck.analysis.torch_api import (
    FUNCTION_DEFS,
    MODULE_BASES,
    PARAMETER_CTORS,
    is_torch_nn_class,
    never_module,
)
from dpcheck.record import record

if TYPE_CHECKING:
    from dpcheck.analysis.tree import TreeIndex


@record
class ClassInfo:
    """A class statement of the file: its resolved bases, methods and properties."""

    node: ast.ClassDef
    qualname: str
    bases: tuple[str, ...]  # resolved dotted names
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    properties: frozenset[str]
    # `@name.setter` bodies: they run on `self.name = ...`, never on a read of `self.name`.
    setters: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None

    @property
    def name(self) -> str:
        return self.node.name



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
        setters: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for stmt in node.body:
            if isinstance(stmt, FUNCTION_DEFS):
                if any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter")
                       for d in stmt.decorator_list):
                    if any(isinstance(d, ast.Attribute) and d.attr == "setter" for d in stmt.decorator_list):
                        setters[stmt.name] = stmt
                    continue  # the getter keeps the name
                methods[stmt.name] = stmt
                if any(dotted(d) in ("property", "functools.cached_property", "cached_property")
                       for d in stmt.decorator_list):
                    properties.add(stmt.name)
        # Nested classes keep their simple name; a clash keeps the first (rare in model code).
        classes.setdefault(node.name, ClassInfo(node, f"{module}.{node.name}", bases, methods,
                                                frozenset(properties), setters))
    return classes


# A condition on the project index: the named base is defined in no scanned file (nor in a
# module the index can load). See ``module_status``.
UNKNOWN_BASE = "unknown:"
# A condition on the project index: some scanned file wraps the named class in DataParallel.
WRAPPED_CONDITION = "wrapped:"
# A condition on the project index: some scanned file wraps the named class in DataParallel or
# builds it inside a module (a layer, or a part handed to the wrapped model's constructor).
IN_MODEL_CONDITION = "in_model:"


def module_status(classes: dict[str, ClassInfo], module: str, imports: ImportMap | None = None,
                  index: TreeIndex | None = None) -> dict[str, tuple[bool, frozenset[str]]]:
    """For each class: (is a module for sure, else the outside names that could make it one).

    A base that no scanned file defines (a project file left out of the scan, a package that is
    not installed) cannot be proved a module. A class that derives from one and reads like a
    module itself (it defines ``forward`` and names torch.nn layers, Parameters or buffers) is
    taken for one on that condition: ``unknown:<base>`` holds when the index finds no such base.
    """
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
            elif not never_module(base):
                unresolved.add(base)
        if unresolved and imports is not None and _reads_like_module(classes[name], imports, index):
            unresolved |= {UNKNOWN_BASE + base for base in unresolved if not base.startswith(UNKNOWN_BASE)}
        if unresolved:
            # DataParallel takes only an nn.Module: a class a scanned script wraps is one, whatever
            # its unseen base (pix2pixHD's models built on a BaseModel outside the scan).
            unresolved.add(f"{WRAPPED_CONDITION}{module}.{name}")
        status[name] = (False, frozenset(unresolved))
        return status[name]

    try:
        for name in classes:
            visit(name, frozenset())
    finally:
        # A recursive closure refers to itself through its cell: a reference cycle that would keep
        # the classes (and through them the file's tree) alive until the cyclic collector runs.
        visit = None
    return status




_REGISTERS = frozenset({"register_buffer", "register_parameter", "add_module", "register_module"})


def _reads_like_module(info: ClassInfo, imports: ImportMap, index: TreeIndex | None = None) -> bool:
    """Does the class define ``forward`` and name a torch.nn layer class or a Parameter, or
    register a buffer/parameter/submodule on ``self``, in its class attributes or ``__init__``?
    Read from the file's walk (``index``) when given: a file with such a class is walked anyway
    (its class is a module on a condition), and a slice of the walk is cheaper than ``ast.walk``."""
    if "forward" not in info.methods:
        return False
    # Class attributes and __init__ (where layers are built), not the long forward bodies.
    parts = [stmt for stmt in info.node.body if not isinstance(stmt, FUNCTION_DEFS)]
    if "__init__" in info.methods:
        parts.append(info.methods["__init__"])
    walk = ast.walk if index is None else index.subtree
    for node in (n for part in parts for n in walk(part)):
        # torch.nn classes and Parameter are capitalised: resolve only capitalised names.
        if isinstance(node, ast.Attribute):
            if node.attr in _REGISTERS and isinstance(node.value, ast.Name) and node.value.id == "self":
                return True
            if not node.attr[:1].isupper():
                continue
        elif not (isinstance(node, ast.Name) and node.id[:1].isupper()):
            continue
        name = imports.resolve(node)
        if name and (is_torch_nn_class(name) or name in PARAMETER_CTORS):
            return True
    return False
