"""Samples of a batch paired by strided slices of dim 0: `x[0::2]` combined with `x[1::2]`.

Code that lays pairs out interleaved in the batch (mixup partners, siamese pairs, real/fake pairs)
combines sample 2i with sample 2i+1 through two strided slices of the batch dim with the same step
and different starts (audioset_tagging_cnn's `do_mixup`: `x[0::2] * lam[0::2] + x[1::2] * lam[1::2]`).
Under DataParallel each replica pairs within its own chunk: a chunk that starts at an odd sample,
or has an odd size, pairs other samples than one device does (or its two slices differ in length
and the arithmetic raises), while code outside the model pairs the targets over the whole batch.
Even chunks keep the pairs: the hazard is latent in the batch and GPU counts.

Such a helper is often a function of another file. Each file records its module-level functions
that pair the samples of a parameter so (``FileResult.pairing_helpers``: function -> the positions
of those parameters); a call of a function imported from the project carries
``strided_pairing:<dotted name>@<positions>`` (those of the batch tensors it is handed), which the project index settles from the scanned
files (``ClassIndex.pairing_helper``).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpcheck.analysis.context import FileContext
    from dpcheck.analysis.tree import FunctionInfo

STRIDED_PAIRING_CONDITION = "strided_pairing:"
# Every strided slice is written with `::` (`x[0::2]`, `x[::2]`): a file without it has none.
_STRIDE_TEXT = "::"


def paired_names(node: ast.BinOp) -> set[str]:
    """The names of which ``node`` combines two strided slices of dim 0 with the same step and
    different starts, one on each side (`x[0::2] + x[1::2]`, `x[::2] - x[1::2]`)."""
    left, right = _strided_slices(node.left), _strided_slices(node.right)
    return {name for name, slices in left.items()
            if any(step == s and start != t for step, start in slices for s, t in right.get(name, ()))}


def _strided_slices(node: ast.AST) -> dict[str, set[tuple[int, int]]]:
    """name -> {(step, start)} of the strided dim-0 slices of names in ``node``'s subtree."""
    found: dict[str, set[tuple[int, int]]] = {}
    for sub in ast.walk(node):
        stride = _stride(sub) if sub.__class__ is ast.Subscript else None
        if stride is not None:
            found.setdefault(sub.value.id, set()).add(stride)
    return found


def _stride(node: ast.Subscript) -> tuple[int, int] | None:
    """(step, start) of `name[start::step]` (or `name[start::step, ...]`), step 2 or more; else None."""
    if node.value.__class__ is not ast.Name:
        return None
    first = node.slice.elts[0] if node.slice.__class__ is ast.Tuple and node.slice.elts else node.slice
    if first.__class__ is not ast.Slice or first.upper is not None:
        return None
    step, start = first.step, first.lower
    if not (_int(step) and step.value >= 2) or not (start is None or _int(start)):
        return None
    return step.value, 0 if start is None else start.value


def _int(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def strided_pairings(fn: FunctionInfo, ctx: FileContext) -> list[tuple[ast.BinOp, set[str]]]:
    """Each innermost arithmetic of ``fn`` that pairs samples of a name, with the names paired."""
    if not ctx.fact(_sliced_twice):
        return []
    found = []
    for node in fn.nodes(ast.BinOp):
        names = paired_names(node)
        if names and not any(paired_names(inner) for inner in ast.walk(node)
                             if inner is not node and inner.__class__ is ast.BinOp):
            found.append((node, names))
    return found


def _sliced_twice(ctx: FileContext) -> bool:
    """Does some name of the file have two strided dim-0 slices of one step and different starts?
    Read first (the text, then the file's subscripts) before any function's arithmetic is walked:
    `::` is common (rotary embeddings' `x[..., ::2]`), strided batch slices are rare."""
    if _STRIDE_TEXT not in ctx.source.text:
        return False
    seen: dict[tuple[str, int], int] = {}
    for node in ctx.nodes(ast.Subscript):
        stride = _stride(node)
        if stride is not None:
            step, start = stride
            if seen.setdefault((node.value.id, step), start) != start:
                return True
    return False


def pairing_helpers(ctx: FileContext) -> dict[str, list[str]]:
    """This file's module-level functions that pair the samples of some of their parameters ->
    the positions of those parameters."""
    if not ctx.fact(_sliced_twice):
        return {}
    found: dict[str, list[str]] = {}
    for name, node in ctx.module_functions.items():
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        fn = ctx.function(node, None)
        paired = {n for _, names in strided_pairings(fn, ctx) for n in names}
        positions = [str(i) for i, p in enumerate(params) if p in paired and p not in fn.local_values]
        if positions:
            found[name] = positions
    return found


def summarize_pairing_helpers(ctx: FileContext, result) -> None:
    """Fill ``result.pairing_helpers`` (see ``pairing_helpers``)."""
    result.pairing_helpers = pairing_helpers(ctx)
