"""Which binding of a name reaches a point of the code: the one fact rules ask when they follow a
name back to the value it holds (a keyword's constant, a loader, a graph object, rows a mask
selected, a pooled map).

The answer follows the statements as Python runs them, not the line order: a binding reaches a read
when every path from the scope's entry to the read passes it last. A binding in one arm of an `if`
does not reach the other arm or, alone, the code after the `if`; a binding later in a loop's body
reaches the top of the body on the next iteration; an `except` clause may follow any statement of
its `try`. Where more than one binding may reach, or one that is not a plain assignment (a tuple
target, `+=`, `with ... as`, an import, a parameter), the answer is None: the value is not known.
"""

from __future__ import annotations

import ast
from itertools import pairwise
from typing import Any

from dpcheck.analysis.torch_api import LOOP_STATEMENTS

# Nodes that open a scope of their own: names bound inside belong to them.
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# Comprehensions are scopes for their targets; a `:=` inside one binds in the scope around it.
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_TRIES = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
# What holds statements: a statement's body, else and finally lists; an except clause; a match case.
_BLOCK_FIELDS = ("body", "orelse", "finalbody")
_BLOCK_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


def reaching_assignment(index: Any, name: str, at: ast.AST | None, *,
                        module_fallback: bool = False) -> ast.Assign | ast.AnnAssign | None:
    """The plain assignment (`name = value`, `a = name = value`, `name: T = value`) whose value
    ``name`` holds when ``at`` runs, or None (see ``reaching_binding``)."""
    binding = reaching_binding(index, name, at, module_fallback=module_fallback)
    return binding if isinstance(binding, (ast.Assign, ast.AnnAssign)) else None


def reaching_binding(index: Any, name: str, at: ast.AST | None, *,
                     module_fallback: bool = False) -> ast.stmt | None:
    """The statement whose binding of ``name`` reaches ``at`` (a node of ``index``: a
    ``FileContext`` or a ``FunctionInfo``) on every path: a plain assignment, or the `for` loop
    whose target binds ``name`` for a read in its body (the caller reads the target). None when it
    is a parameter, when none or several may reach, or when the one that does is another kind of
    binding.

    ``module_fallback``: a name the scope of ``at`` never binds (nor a function around it) is read
    from the module, as a script's functions read its settings: the module's one binding of it,
    when that is a plain assignment (a function may run at any point of the module's code, so only
    a name bound once there is known). Needs ``index`` to be the file's context."""
    if at is None:
        return None
    binders = index.fact(_binders_by_name).get(name)
    # The statement that holds `at`, and whether a comprehension around `at` binds the name itself.
    stmt, scope = at, None
    while not isinstance(stmt, ast.stmt):
        parent = index.parent(stmt)
        if parent is None:
            return None
        if isinstance(parent, _COMPREHENSIONS) and binders and any(
                _scope_of(index, b)[0] is parent for b in binders):
            return None  # the comprehension's own variable
        if isinstance(parent, ast.Lambda):
            scope = parent  # read when the lambda is called, not here: only its free names are known
            break
        stmt = parent
    if scope is None:
        scope = index.enclosing(stmt, _SCOPES)
        if scope is None:
            return None
    own = [(binder, chain) for binder in binders or () for found, chain in [_scope_of(index, binder)]
           if found is scope]
    if any(isinstance(binder, (ast.Global, ast.Nonlocal)) for binder, _ in own) \
            or _declared_in_other_function(index, binders or (), scope):
        return None  # assigned by other functions too
    if own and not isinstance(scope, ast.Lambda):
        found = _reaching_in_scope(index, name, stmt, scope, own)
        if found is not _UNBOUND:
            return found
    if own or _is_parameter(scope, name):
        return None  # a local name no binding reaches on every path, or a parameter
    if not module_fallback or isinstance(scope, ast.Module):
        return None
    return _module_binding(index, name, scope, binders or ())


# `_reaching_in_scope` walked up to the scope's entry without meeting a binding.
_UNBOUND = object()


def _reaching_in_scope(index, name: str, stmt: ast.stmt, scope: ast.AST, own: list) -> Any:
    """The binding of ``name`` that reaches statement ``stmt`` of ``scope``, None where unclear, or
    ``_UNBOUND`` where no binding in the scope comes before it on any path."""
    holding = set()  # ids of the nodes with a binding of the name inside them (bindings included)
    in_header = set()  # ids of compound statements whose own header binds it (`for name in`, `as name`)
    for binder, chain in own:
        holding.update(map(id, chain))
        if isinstance(binder, ast.excepthandler):
            in_header.add(id(binder))  # `except ... as name`
        for below, above in pairwise(chain):
            if not isinstance(below, _BLOCK_HOLDERS):
                in_header.add(id(above))
    if isinstance(stmt, ast.While) and id(stmt) in holding:
        return None  # a read in the test: the body's bindings reach it on the next iteration
    while True:
        holder = index.parent(stmt)
        if holder is None:
            return None
        block = statement_list(holder, stmt)
        if block is None:
            return None
        found = _last_in(block, block.index(stmt), name, holding)
        if found is not _UNBOUND:
            return found
        if holder is scope:
            return _UNBOUND
        if id(holder) in in_header:
            loop_target = isinstance(holder, (ast.For, ast.AsyncFor)) and block is holder.body \
                and target_binds(holder.target, name)
            return holder if loop_target else None
        if isinstance(holder, LOOP_STATEMENTS) and id(holder) in holding:
            return None  # bound in the loop: a later statement's binding reaches on the next iteration
        if isinstance(holder, _TRIES):
            if block is holder.orelse:  # runs after the whole `try` body
                found = _last_in(holder.body, len(holder.body), name, holding)
                if found is not _UNBOUND:
                    return found
            elif block is holder.finalbody and id(holder) in holding:
                return None  # after any of the body, the handlers or the else
        elif isinstance(holder, ast.excepthandler):
            holder = index.parent(holder)  # the `try`: any of its body may have run
            if holder is None or any(id(s) in holding for s in holder.body):
                return None
        elif isinstance(holder, ast.match_case):
            holder = index.parent(holder)
            if holder is None or id(holder) in in_header:
                return None
        stmt = holder


def _last_in(block: list, end: int, name: str, holding: set) -> Any:
    """The binding the statements of ``block`` before position ``end`` leave: the last statement
    that binds the name, when it is a plain assignment of it (None when it binds otherwise, or in a
    nested statement: on some paths only), else ``_UNBOUND``."""
    for earlier in reversed(block[:end]):
        if id(earlier) in holding:
            return earlier if _assigns(earlier, name) else None
    return _UNBOUND


def _assigns(stmt: ast.stmt, name: str) -> bool:
    """Is ``stmt`` a plain assignment of ``name`` (`name = v`, `a = name = v`, `name: T = v`)?"""
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    return isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name) \
        and stmt.target.id == name


def target_binds(target: ast.AST, name: str) -> bool:
    """Does assigning to ``target`` bind ``name``: the name itself, or inside a tuple, list or
    starred target? A store into an attribute or item of it (`model.loss_type = 'bce'`) changes the
    object the name holds, not what the name holds."""
    if isinstance(target, ast.Name):
        return target.id == name
    if isinstance(target, ast.Starred):
        return target_binds(target.value, name)
    return isinstance(target, (ast.Tuple, ast.List)) and any(target_binds(e, name) for e in target.elts)


def statement_list(holder: ast.AST, stmt: ast.stmt) -> list | None:
    """The statement list of ``holder`` (its body, `else` or `finally`) that holds ``stmt``, or None."""
    for field in _BLOCK_FIELDS:
        block = getattr(holder, field, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    return None


def statements_before(holder: ast.AST, stmt: ast.stmt) -> list[ast.stmt]:
    """The statements of the list of ``holder`` that holds ``stmt``, before it (none where no list
    of ``holder`` holds it)."""
    block = statement_list(holder, stmt)
    return block[:next(i for i, s in enumerate(block) if s is stmt)] if block is not None else []


def _is_parameter(scope: ast.AST, name: str) -> bool:
    if not isinstance(scope, _FUNCTION_SCOPES):
        return False
    args = scope.args
    return any(a.arg == name for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                        *filter(None, (args.vararg, args.kwarg))))


def _declared_in_other_function(index, binders, scope: ast.AST) -> bool:
    """May a call of another function rebind ``scope``'s variable: a `global` declaration of the
    name (for the module's), or a `nonlocal` one in a function nested in ``scope``? Its binding
    reaches wherever that function was called, which the statements of ``scope`` do not show."""
    for binder in binders:
        if isinstance(binder, ast.Global) and isinstance(scope, ast.Module):
            return True
        if isinstance(binder, ast.Nonlocal) and isinstance(scope, _FUNCTION_SCOPES):
            cur = index.parent(binder)
            while cur is not None and cur is not scope:
                cur = index.parent(cur)
            if cur is scope:
                return True
    return False


def _module_binding(index, name: str, scope: ast.AST, binders) -> ast.stmt | None:
    """The module's one binding of ``name``, when it is a plain assignment, no function around
    ``scope`` binds the name (then the read is of that function's variable) and no function
    declares it `global` (a call of that one rebinds it)."""
    if any(isinstance(binder, ast.Global) for binder in binders):
        return None
    around = []
    cur = scope
    while cur is not None:
        if isinstance(cur, _FUNCTION_SCOPES):
            if _is_parameter(cur, name):
                return None
            around.append(cur)
        cur = index.parent(cur)
    found = []
    for binder in binders:
        where, chain = _scope_of(index, binder)
        if any(where is function for function in around):
            return None
        if isinstance(where, ast.Module):
            found.append(chain)
    if len(found) != 1:
        return None
    # The statement of the one binding (wherever it sits in the module's code).
    binding = next((n for n in found[0] if isinstance(n, ast.stmt)), None)
    return binding if binding is not None and _assigns(binding, name) else None


def _scope_of(index, binder: ast.AST) -> tuple[ast.AST | None, list[ast.AST]]:
    """(the scope a binder binds in, the nodes from the binder up to that scope, the scope left
    out). A definition binds its name in the scope around it; a `:=` in a comprehension, in the
    scope around the comprehension."""
    chain = [binder]
    walrus = isinstance(index.parent(binder), ast.NamedExpr)
    cur = index.parent(binder)
    while cur is not None:
        if isinstance(cur, _SCOPES) or (isinstance(cur, _COMPREHENSIONS) and not walrus):
            return cur, chain
        chain.append(cur)
        cur = index.parent(cur)
    return None, chain


def _binders_by_name(index) -> dict[str, list[ast.AST]]:
    """Name -> the nodes of ``index`` that bind it, whatever the scope: stores and deletions of it,
    definitions, imports, `except ... as`, match captures, and `global`/`nonlocal` declarations."""
    found: dict[str, list[ast.AST]] = {}
    for node in index.nodes(ast.Name):
        if node.ctx.__class__ is not ast.Load:
            found.setdefault(node.id, []).append(node)
    for node in index.nodes(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        found.setdefault(node.name, []).append(node)
    for node in index.nodes(ast.Import, ast.ImportFrom):
        for alias in node.names:
            if alias.name != "*":
                found.setdefault(alias.asname or alias.name.partition(".")[0], []).append(node)
    for node in index.nodes(ast.ExceptHandler, ast.MatchAs, ast.MatchStar):
        if node.name:
            found.setdefault(node.name, []).append(node)
    for node in index.nodes(ast.MatchMapping):
        if node.rest:
            found.setdefault(node.rest, []).append(node)
    for node in index.nodes(ast.Global, ast.Nonlocal):
        for declared in node.names:
            found.setdefault(declared, []).append(node)
    return found
