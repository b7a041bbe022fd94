"""
## What it does
Flags values with a data-dependent size that reach forward's return value:
`torch.unique`, `nonzero`, `masked_select`, `argwhere`, one-argument `torch.where`, and
boolean-mask indexing (`x[x > 0]`, `x[mask]`).

## Why is this bad?
Each replica computes them on its own chunk and gather concatenates the pieces:
`unique` returns duplicates (`[1, 2, 3, 1, 2, 3]`), `nonzero` returns chunk-local
indices (`[1, 3, 1, 3]`), and 2-D results with different sizes per replica fail with
`Input tensor at index 1 has invalid shape`. Nothing warns in the 1-D case.

## How to fix
Return the dense tensor (or a mask) from forward and compute these after gather.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.outputs import gathered_class, optional_severity, returned_leaves
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule

_OPS = frozenset({"unique", "unique_consecutive", "nonzero", "masked_select", "argwhere"})
_PASS_THROUGH = frozenset({"float", "long", "int", "view", "reshape", "flatten", "squeeze", "unsqueeze",
                           "detach", "clone", "contiguous", "to", "cpu", "sort", "t"})


class DataDependentOutputSize(Rule):
    code = "DP403"
    name = "data-dependent-output-size"
    severity = Severity.ERROR
    wrapper_method = "gather"
    forward_code_only = True
    confirms = frozenset({
        K.OUTPUT_SHAPE_DIFFERS, K.GATHER_FAILED, K.VALUES_DIFFER, K.INTEGER_VALUES_DIFFER, K.GRADS_DIFFER})
    summary = "unique/nonzero/masked_select/boolean-mask results returned from forward gather wrongly"
    fix_hint = "Return dense tensors or masks and compute unique/nonzero after the forward pass"
    bad_example = """
        class Vocab(nn.Module):
            def forward(self, ids):
                return torch.unique(ids)
    """
    good_example = """
        class Vocab(nn.Module):
            def forward(self, ids):
                present = torch.zeros(ids.shape[0], 100, device=ids.device)
                present.scatter_(1, ids, 1.0)
                return present
    """

    def check_class(self, model):
        if not gathered_class(model):
            return
        for leaf, fn, anchor in returned_leaves(model):
            why = _data_dependent(leaf, fn, model, 0)
            if why:
                yield self.violation(anchor, f"forward returns {why}, whose size depends on the data: "
                                     "DataParallel concatenates per-replica results (duplicates, "
                                     "chunk-local indices, or a gather shape error)",
                                     severity=optional_severity(anchor, model, leaf))


def _data_dependent(node, fn, model, depth) -> str | None:
    if depth > 6:
        return None
    resolve = model.ctx.resolve
    if isinstance(node, ast.Name):
        for value in fn.local_values.get(node.id, ()):
            why = _data_dependent(value, fn, model, depth + 1)
            if why:
                return why
        return None
    if isinstance(node, ast.Call):
        func = node.func
        name = resolve(func) or ""
        last = name.rsplit(".", 1)[-1] if name.startswith("torch.") else (func.attr if isinstance(func, ast.Attribute) else "")
        if last in _OPS:
            return f"`{last}`"
        if name == "torch.where" and len(node.args) == 1:
            return "one-argument `torch.where`"
        if isinstance(func, ast.Attribute) and func.attr in _PASS_THROUGH:
            return _data_dependent(func.value, fn, model, depth + 1)
        return None
    if isinstance(node, ast.Subscript) and _is_mask(node.slice, fn):
        return "a boolean-mask selection"
    return None


def _is_mask(index, fn) -> bool:
    if isinstance(index, ast.Compare):
        return True
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.Invert):
        return True
    if isinstance(index, ast.Name):
        values = fn.local_values.get(index.id, ())
        return bool(values) and all(isinstance(v, ast.Compare) or (
            isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Invert)) or (
            isinstance(v, ast.BinOp) and isinstance(v.op, (ast.BitAnd, ast.BitOr))) for v in values)
    return False

