"""Does a file train models itself: a loop that runs a backward pass, and an optimizer step?

The project index reads it (``ClassIndex.unused_dataparallel``): a scanned project with training
code of its own that wraps nothing in DataParallel is an application that does not use
DataParallel, not a class library whose users may wrap any model.

A training loop is a `for` or `while` loop whose body calls `<x>.backward(...)` (`loss.backward()`,
`scaler.scale(loss).backward()`, `accelerator.backward(loss)`), or calls a function or method of
the same file whose own body does (`for batch in loader: self.train_step(batch)`), in a file that
also calls `<x>.step(...)` (`optimizer.step()`, `scaler.step(optimizer)`). A backward pass outside
any loop is not one: a loss-scaler helper (timm's `NativeScaler.__call__`) or an example in a
docstring trains nothing by itself.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.context import FileContext
from dpcheck.analysis.torch_api import FUNCTION_DEFS, LOOP_STATEMENTS

# Text a file that trains holds; without both, nothing below is walked.
_TRAINING_TEXT = ("backward(", ".step(")
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def trains_models(ctx: FileContext) -> bool:
    """Does the file run a training loop (see the module's docstring)?"""
    return ctx.fact(_trains_models)


def _trains_models(ctx: FileContext) -> bool:
    text = ctx.source.text
    if not all(token in text for token in _TRAINING_TEXT):
        return False
    backward: list[ast.Call] = []
    steps = False
    for call in ctx.nodes(ast.Call):
        attr = call.func.attr if isinstance(call.func, ast.Attribute) else None
        if attr == "backward":
            backward.append(call)
        elif attr == "step":
            steps = True
    if not backward or not steps:
        return False
    # The functions whose own body runs a backward pass outside a loop: a loop that calls one trains.
    stepping: set[str] = set()
    for call in backward:
        scope = ctx.enclosing(call, LOOP_STATEMENTS + _SCOPES)
        if isinstance(scope, LOOP_STATEMENTS):
            return True
        if isinstance(scope, FUNCTION_DEFS):
            stepping.add(scope.name)
    if not stepping:
        return False
    for call in ctx.nodes(ast.Call):
        func = call.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in stepping and isinstance(ctx.enclosing(call, LOOP_STATEMENTS + _SCOPES), LOOP_STATEMENTS):
            return True
    return False
