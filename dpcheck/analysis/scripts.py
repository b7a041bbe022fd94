"""Training-script facts: which names hold an `nn.DataParallel` wrapper, where, and until when.

Tracked: `model = nn.DataParallel(net)` (also chained: `DataParallel(net).cuda()`),
attributes such as `self.model = DataParallel(...)` (for every method of that class),
and names bound to the result of a function in the same file that returns a
DataParallel. A name holds the wrapper from its assignment until it is next reassigned
in the same scope (`model = model.module` ends it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property

from dpcheck.analysis.context import FileContext
from dpcheck.constants import DATAPARALLEL_CLASSES

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module, ast.Lambda)


@dataclass
class Wrap:
    name: str  # "model" or "self.model"
    call: ast.Call  # the DataParallel(...) construction (or the builder call)
    scope: ast.AST  # function, class (for self.* attributes) or module
    start: int  # line of the assignment
    end: float  # line of the next reassignment, or infinity

    @property
    def inner(self) -> ast.AST | None:
        return self.call.args[0] if self.call.args else next(
            (k.value for k in self.call.keywords if k.arg == "module"), None)


class ScriptFacts:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.parents = ctx._index[1]

    def is_dp_call(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and (self.ctx.resolve(node.func) or "") in DATAPARALLEL_CLASSES

    @property
    def dp_calls(self) -> list[ast.Call]:
        return self.ctx.dataparallel_calls

    @cached_property
    def builders(self) -> set[str]:
        """Functions in this file that return a DataParallel wrapper."""
        found = set()
        for node in self.ctx.nodes(ast.FunctionDef, ast.AsyncFunctionDef):
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None and self.dp_expression(ret.value, set()):
                    found.add(node.name)
        return found

    def dp_expression(self, node: ast.AST, builders: set[str] | None = None) -> ast.Call | None:
        """The DataParallel construction ``node`` evaluates to (through `.cuda()`/`.to()` chains)."""
        builders = self.builders if builders is None else builders
        while isinstance(node, ast.Call):
            if self.is_dp_call(node):
                return node
            if isinstance(node.func, ast.Name) and node.func.id in builders:
                return node
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("cuda", "to", "train", "eval", "float", "half"):
                node = node.func.value
                continue
            return None
        return None

    def scope_of(self, node: ast.AST, attribute: bool = False) -> ast.AST:
        cur = self.parents.get(id(node))
        while cur is not None:
            if attribute and isinstance(cur, ast.ClassDef):
                return cur
            if not attribute and isinstance(cur, _SCOPES):
                return cur
            cur = self.parents.get(id(cur))
        return self.ctx.tree

    @cached_property
    def wraps(self) -> list[Wrap]:
        assignments: dict[tuple[int, str], list[tuple[int, ast.AST]]] = {}
        for node in self.ctx.nodes(ast.Assign, ast.AnnAssign):
            if node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    text = _target_text(target)
                    if text is None:
                        continue
                    scope = self.scope_of(node, attribute=text.startswith("self."))
                    assignments.setdefault((id(scope), text), []).append((node.lineno, node))
        wraps = []
        for (_, text), entries in assignments.items():
            entries.sort(key=lambda e: e[0])
            for i, (line, node) in enumerate(entries):
                call = self.dp_expression(node.value)
                if call is None:
                    continue
                end = entries[i + 1][0] if i + 1 < len(entries) else float("inf")
                wraps.append(Wrap(text, call, self.scope_of(node, text.startswith("self.")), line, end))
        return wraps

    def wrap_for(self, node: ast.AST) -> Wrap | None:
        """The wrapper an expression (`model`, `self.model`) refers to at its position, if any."""
        text = _target_text(node)
        if text is None:
            return None
        for wrap in self.wraps:
            if wrap.name != text or not (wrap.start < node.lineno <= wrap.end if wrap.end != float("inf")
                                         else wrap.start < node.lineno):
                continue
            if not self._inside(node, wrap.scope):
                continue
            if not text.startswith("self."):
                innermost = self.scope_of(node)
                if innermost is not wrap.scope and (wrap.scope is not self.ctx.tree or _binds(innermost, text)):
                    continue  # a different local of the same name
            return wrap
        return None

    def _inside(self, node: ast.AST, scope: ast.AST) -> bool:
        if scope is self.ctx.tree:
            return True
        cur = self.parents.get(id(node))
        while cur is not None:
            if cur is scope:
                return True
            cur = self.parents.get(id(cur))
        return False

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))


def _binds(scope: ast.AST, name: str) -> bool:
    """Does a function bind ``name`` itself (a parameter or an assignment)?"""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        if any(a.arg == name for a in args.posonlyargs + args.args + args.kwonlyargs):
            return True
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(scope))


def _target_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def script_facts(ctx: FileContext) -> ScriptFacts:
    return ctx.fact(ScriptFacts)


def mentions_dataparallel(ctx: FileContext) -> bool:
    """Does the file construct an nn.DataParallel at all? (The script rules need one.)"""
    return bool(ctx.dataparallel_calls)
