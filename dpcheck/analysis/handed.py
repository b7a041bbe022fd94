"""What the calls of a script or trainer hand each function and class of the project, argument by argument.

A wrap site that wraps what its caller hands it (`class Trainer: def __init__(self, model, ...):
self.model = DataParallel(model)`, `def train(model): model = DataParallel(model)`) runs what every
call of that function or class passes there: the training script's `Trainer(model, ...)` after
`model = Net(...)`. The wrap site's file records a ``wrapping.HANDED_LEAF`` for the parameter; the
calls are in other files, so each file that can make them records its calls (``handed_calls``), and
the project index settles the leaf from all of them (``ClassIndex._handed_values``).

Only a file that looks like a script, a trainer or a test records them (``records_calls``: a
training token, a DataParallel form or `__main__` in its text, or a `test_*` module): a model library's files never build a
trainer, and reading every call of every file would cost a model library as much as a rule. Every
other file still lists the simple names it calls (``FileResult.called``): a callee one of them
calls by name is not settled, nor one whose name a recording file uses other than by calling it
(a registry of trainers, a callback), nor a class with a subclass in a file that does not record.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from dpcheck.analysis.scripts import LIBRARY_ROOTS, mentions_script_token, mentions_training_token
from dpcheck.analysis.torch_api import FunctionNode
from dpcheck.analysis.wrapping import instance_leaves

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext

# An entry of ``handed_calls``: `<callee>|<k or keyword>=<leaves, comma-separated, or UNTRACED>|...`
# for a call (``PASSED_ON`` among them where it passes `*args` or `**kwargs`), `<callee>|USED_OTHERWISE`
# where the file uses the callee's name other than by calling it, `<class>|OWN_INIT` for each of its
# classes that defines `__init__` (a subclass that does not runs its base's with its own calls).
UNTRACED = "?"
PASSED_ON = "*"
USED_OTHERWISE = "!"
OWN_INIT = "init"
# Calls that name a class without using it as a value.
_TYPE_CALLS = frozenset({"isinstance", "issubclass", "super", "type"})


def records_calls(ctx: FileContext) -> bool:
    """Does the file look like a script, a trainer or a test module (`test_*.py`, which builds the
    project's trainers with models of its own), whose calls ``handed_calls`` records?"""
    return mentions_training_token(ctx) or mentions_script_token(ctx) or "__main__" in ctx.source.text \
        or ctx.module.rpartition(".")[2].startswith("test")


def handed_calls(ctx: FileContext) -> list[str]:
    """The entries described above, for every call of a function or class of the project that this
    file names: an imported one, or one of its own module-level ones, by name or through an imported
    module (`opennre.framework.SentenceRE(model=...)`), and each `super().__init__(...)` (a call of the
    class's first base) or `Base.__init__(self, ...)`."""
    own = set(ctx.module_functions) | set(ctx.classes)
    aliases = ctx.imports.aliases
    found: set[str] = set()
    called: set[int] = set()
    named: dict[tuple[int, str], str] = {}  # (scope, name) -> its leaves: many calls pass one name
    for call in ctx.nodes(ast.Call):
        callee, skipped = _callee(call, own, ctx)
        if not callee:
            continue
        called.add(id(call.func))
        scope = ctx.enclosing(call, FunctionNode)
        passed: list[str] = []
        for i, arg in enumerate(call.args[skipped:]):
            if isinstance(arg, ast.Starred):
                passed.append(PASSED_ON)
                break
            passed.append(f"{i}={_leaves(arg, scope, ctx, named)}")
        for k in call.keywords:
            passed.append(PASSED_ON if k.arg is None else f"{k.arg}={_leaves(k.value, scope, ctx, named)}")
        found.add("|".join([callee, *passed]))
    for node in ctx.nodes(ast.Name):
        if node.id not in aliases and node.id not in own or id(node) in called or not isinstance(node.ctx, ast.Load):
            continue  # (most names are locals: the cheapest test first)
        parent = ctx.parent(node)
        if isinstance(parent, (ast.Attribute, ast.ClassDef, FunctionNode)) or isinstance(parent, ast.Call) and (
                isinstance(parent.func, ast.Name) and parent.func.id in _TYPE_CALLS):
            continue
        callee = ctx.resolve(node) or ""
        if "." in callee and not callee.startswith(LIBRARY_ROOTS):
            found.add(f"{callee}|{USED_OTHERWISE}")
    found.update(f"{info.qualname}|{OWN_INIT}" for info in ctx.classes.values() if "__init__" in info.methods)
    return sorted(found)


def _callee(call: ast.Call, own: set[str], ctx: FileContext) -> tuple[str, int]:
    """(The resolved name of the function or class of the project ``call`` calls, or ""; how many
    leading arguments are not its parameters: `self` of `Base.__init__(self, ...)`.)"""
    func = call.func
    skipped = 0
    if isinstance(func, ast.Attribute) and func.attr == "__init__":
        if isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
            holder = ctx.enclosing(call, ast.ClassDef)
            info = ctx.classes.get(holder.name) if holder is not None else None
            return (info.bases[0], 0) if info is not None and info.bases else ("", 0)
        func, skipped = func.value, 1
    head = func
    while isinstance(head, ast.Attribute):
        head = head.value
    if not isinstance(head, ast.Name) or head.id not in ctx.imports.aliases and (
            head is not func or head.id not in own):
        return "", 0
    callee = ctx.resolve(func) or ""
    if "." not in callee or callee.startswith(LIBRARY_ROOTS):
        return "", 0
    return callee, skipped


def _leaves(value: ast.AST, scope: ast.AST | None, ctx: FileContext, named: dict[tuple[int, str], str]) -> str:
    """What ``value`` may be an instance of (wrapping.instance_leaves), comma-separated, or UNTRACED. A
    name's leaves do not depend on where in its scope it is read: asked once per scope (``named``)."""
    if isinstance(value, ast.Name):
        key = (id(scope), value.id)
        if key not in named:
            leaves = instance_leaves(value, scope, ctx, flow=True)
            named[key] = UNTRACED if leaves is None else ",".join(leaves)
        return named[key]
    leaves = instance_leaves(value, scope, ctx, flow=True) if isinstance(value, (ast.Call, ast.IfExp)) \
        else [] if isinstance(value, ast.Constant) and value.value is None else None
    return UNTRACED if leaves is None else ",".join(leaves)
