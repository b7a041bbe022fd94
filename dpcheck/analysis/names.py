"""Resolve names to dotted paths from a module's own imports, without importing it.

``nn.Linear`` under ``import torch.nn as nn`` is ``torch.nn.Linear``;
``M`` under ``from torch.nn import Module as M`` is ``torch.nn.Module``; a class
imported from a sibling file resolves to that file's dotted module path, so the
project-wide class index can look it up.
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from pathlib import Path

from dpcheck.analysis.torch_api import ALTERNATE_CONSTRUCTORS


def module_name_for(path: Path | str) -> str:
    """The dotted module name of ``path``, walking up through ``__init__.py`` packages."""
    folder, name = os.path.split(os.path.abspath(path))
    stem = _stem(name)
    package = _package_of(folder)
    if stem == "__init__":
        return package or stem
    return f"{package}.{stem}" if package else stem


def _stem(name: str) -> str:
    """``PurePath(name).stem``: the name without its last suffix (a leading dot is no suffix)."""
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


@lru_cache(maxsize=4096)
def _package_of(folder: str) -> str:
    """Dotted package name of a folder ('' when it is not a package). Cached per folder."""
    if not os.path.exists(os.path.join(folder, "__init__.py")):
        return ""
    parent = os.path.dirname(folder)
    above = _package_of(parent) if parent != folder else ""
    name = os.path.basename(folder)
    return f"{above}.{name}" if above else name


class ImportMap:
    """Local name -> dotted target, from the import statements anywhere in a module."""

    def __init__(self, tree: ast.Module, module: str, is_package: bool = False,
                 import_nodes: list[ast.AST] | None = None) -> None:
        self.module = module
        self.aliases: dict[str, str] = {}
        # The modules its star imports read names from, in source order (the last one binding a
        # name wins): the project index resolves a name the module neither defines nor imports by name.
        self.star_modules: list[str] = []
        # Every module an import statement names (`a.b` of `import a.b`, `a` and `a:c` of `from a
        # import c`, which may be a submodule or a name): what the index follows to tell which files
        # a wrapping script can reach.
        self.modules: set[str] = set()
        package = module if is_package else module.rpartition(".")[0]
        star = False
        if import_nodes is None:
            import_nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in sorted(import_nodes, key=lambda n: n.lineno):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.modules.add(alias.name)
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".")[0]
                        self.aliases.setdefault(head, head)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".") if package else []
                    if node.level > 1:
                        anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # (`.` before a relative import's: a module of the project, wherever it resolves)
                relative = "." if node.level else ""
                if base:
                    self.modules.add(relative + base)
                for alias in node.names:
                    if alias.name != "*":  # (`base:name`: a submodule or a name the module binds)
                        self.modules.add(f"{relative}{base}:{alias.name}" if base else relative + alias.name)
                    if alias.name == "*":
                        star = True
                        if base:
                            self.star_modules.append(base)
                        continue
                    target = f"{base}.{alias.name}" if base else alias.name
                    self.aliases[alias.asname or alias.name] = target
        if star:
            # `from layers import *` where layers.py does `import torch.nn as nn`: what a star import
            # binds is unknown without reading that module, but these names, used unimported beside
            # one, are PyTorch's by a convention strong enough to rely on.
            for name, target in _STAR_IMPORTED_CONVENTIONS:
                self.aliases.setdefault(name, target)

    def resolve(self, node: ast.AST) -> str | None:
        """Dotted name of a Name/Attribute chain; local (unimported) names get the module prefix."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = node.id
        target = self.aliases.get(head)
        if target is None:
            target = head if head in _BUILTIN_ROOTS else f"{self.module}.{head}"
        return ".".join([target, *reversed(parts)])


# Names a star import is taken to bind when the module does not import them itself.
_STAR_IMPORTED_CONVENTIONS = (("torch", "torch"), ("nn", "torch.nn"), ("F", "torch.nn.functional"))

# Roots that are never local names even without an import (builtins we reason about).
_BUILTIN_ROOTS = frozenset({"list", "dict", "set", "tuple", "setattr", "getattr", "next", "iter",
                            "len", "float", "int", "str", "bool", "super", "isinstance", "self"})


def module_aliases(tree: ast.Module, imports: ImportMap) -> dict[str, str]:
    """Names the module binds, once and at its top level, to another name (`Model = DetectionModel`,
    yolov5's name kept for backwards compatibility): name -> the dotted target, which the project
    index follows as it follows a re-export. A name the top level binds twice (a fallback in an
    `except`, a later `def`) is left out: which binding holds is not known."""
    bound: dict[str, int] = {}
    found: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            if len(stmt.targets) == 1 and names and isinstance(stmt.value, (ast.Name, ast.Attribute)):
                target = imports.resolve(stmt.value)
                if target is not None:
                    found[names[0]] = target
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [stmt.name]
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).partition(".")[0] for a in stmt.names]
        else:
            names = [n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        for name in names:
            bound[name] = bound.get(name, 0) + 1
    return {name: target for name, target in found.items()
            if bound[name] == 1 and target != f"{imports.module}.{name}"}


def declared_all(tree: ast.Module) -> set[str] | None:
    """The names a literal `__all__` of the module declares, or None where it declares none."""
    declared = None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets) \
                and isinstance(stmt.value, (ast.List, ast.Tuple)):
            declared = {e.value for e in stmt.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return declared


def part_class(func: ast.AST, own_classes, tree: ast.Module) -> ast.AST:
    """The class a call builds as a part of another module, by the callee ``func``: `Decoder` of
    `Decoder._from_config(config)` or `Decoder.from_pretrained(path)` (an alternate constructor), else
    ``func`` itself. A class of this file (``own_classes``) that its literal `__all__` exports is a
    library's public model, which users build and wrap on their own (transformers' `MusicgenForCausalLM`,
    also its composite model's decoder): its alternate construction is no part (the callee is returned)."""
    if not (isinstance(func, ast.Attribute) and func.attr in ALTERNATE_CONSTRUCTORS):
        return func
    built = func.value
    if isinstance(built, ast.Name) and built.id in own_classes and built.id in (declared_all(tree) or ()):
        return func
    return built


def callee_name(node: ast.AST | None) -> str:
    """The simple name a call calls (`f` of `f(...)` and of `<x>.f(...)`); "" for any other callee and
    for a node that is no call."""
    if node.__class__ is not ast.Call:
        return ""
    func = node.func
    return func.id if func.__class__ is ast.Name else func.attr if func.__class__ is ast.Attribute else ""


def dotted(node: ast.AST) -> str | None:
    """The literal dotted text of a Name/Attribute chain (no import resolution)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def self_attr(node: ast.AST, self_name: str = "self") -> str | None:
    """``X`` for an expression ``self.X``; else None."""
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == self_name):
        return node.attr
    return None


def self_attr_root(node: ast.AST, self_name: str = "self") -> str | None:
    """``X`` for ``self.X``, ``self.X.y``, ``self.X[k]``, ``self.X[k].y``…; else None."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        attr = self_attr(node, self_name)
        if attr is not None:
            return attr
        node = node.value
    return None
