"""
## What it does
Flags `pad_packed_sequence(...)` in code that runs during `forward` without
`total_length`, or with a `total_length` taken from the lengths of the chunk
(`total_length=lengths[0]`, `lengths.max()`). Code behind a guard no run of the wrapped model
takes is left out: an optional argument no caller passes, and `if isinstance(x, PackedSequence):`
on a forward input of the wrapped model, or of a layer in a file that packs no sequence
(DataParallel's scatter never hands in a PackedSequence; a layer gets one only from code that packs).

## Why is this bad?
Each replica pads to the longest sequence *in its own chunk*, so replicas return
different time dimensions and gather fails with `Input tensor at index 1 has invalid
shape [4, 3, 8], but expected [4, 10, 8]`, or silently pads differently per GPU.
`total_length` was added for exactly this case; a value derived from the chunk's
lengths is still per-chunk.

## How to fix
`pad_packed_sequence(packed, batch_first=True, total_length=padded_input.size(1))`,
using the size of the padded input that every replica received whole along time.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import argument, keyword
from dpcheck.analysis.guards import branch_requires
from dpcheck.findings import Applicability, Severity
from dpcheck.findings import ObservationKind as K
from dpcheck.rule import Rule

_FUNCTION = ("torch.nn.utils.rnn.pad_packed_sequence",)


class PadPackedWithoutTotalLength(Rule):
    code = "DP405"
    name = "pad-packed-without-total-length"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.OUTPUT_SHAPE_DIFFERS, K.GATHER_FAILED})
    summary = "pad_packed_sequence without total_length pads each replica to its own length"
    fix_hint = "Pass total_length=padded_input.size(1) (the full padded length)"
    bad_example = """
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(8, 8, batch_first=True)

            def forward(self, x, lengths):
                packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
                out, _ = self.rnn(packed)
                out, _ = pad_packed_sequence(out, batch_first=True)
                return out
    """
    good_example = """
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(8, 8, batch_first=True)

            def forward(self, x, lengths):
                packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
                out, _ = self.rnn(packed)
                out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
                return out
    """

    def check_class(self, model):
        resolve = model.ctx.resolve
        for fn in model.reachable:
            for call, name in model.ctx.named_calls(fn):
                if not (name in _FUNCTION or name.endswith(".pad_packed_sequence")):
                    continue
                requires = branch_requires(model, fn, call)
                if requires is None:
                    continue  # behind a guard no run of the wrapped model takes
                total = argument(call, 3, "total_length")
                if total is None:
                    if _repadded_to_argument(fn, call):
                        continue  # padded up to the length every replica's argument shares
                    padded = _padded_input(fn, resolve)
                    fix = None if padded is None else self.offer_fix(
                        f"Pad to the input's length: `total_length={padded}`", Applicability.SAFE, total=padded)
                    yield self.violation(call, "`pad_packed_sequence` without `total_length`: each "
                                         "DataParallel replica pads to its own chunk's longest sequence", fix=fix,
                                         requires=requires)
                elif _from_lengths(total, fn, 0):
                    yield self.violation(total, f"`total_length={ast.unparse(total)}` comes from the chunk's "
                                         "lengths, so it still differs between DataParallel replicas",
                                         requires=requires)

    def fix(self, finding, editor):
        import libcst as cst

        call, total = editor.node, finding.fix.get("total")
        if not isinstance(call, cst.Call) or not total:
            return
        extra = cst.parse_expression(f"f(total_length={total})").args[0]
        args = list(call.args)
        if args:
            last = args[-1]
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            extra = extra.with_changes(comma=last.comma)
        editor.replace(call, call.with_changes(args=[*args, extra]))


def _padded_input(fn, resolve) -> str | None:
    """`x.size(1)` (batch_first) or `x.size(0)` for the padded tensor `x` this function packs
    with pack_padded_sequence; None when it is not a plain name in scope."""
    for call in fn.nodes(ast.Call):
        name = resolve(call.func) or ""
        if name.endswith("pack_padded_sequence") and call.args and isinstance(call.args[0], ast.Name):
            batch_first = keyword(call, "batch_first")
            if batch_first is None and len(call.args) > 2:
                batch_first = call.args[2]
            dim = 1 if isinstance(batch_first, ast.Constant) and batch_first.value is True else 0
            padded = _still_padded(call.args[0].id, fn, resolve)
            return None if padded is None else f"{padded}.size({dim})"
    return None


def _still_padded(name, fn, resolve) -> str | None:
    """A name that holds the padded tensor wherever the fix reads it: `name` itself unless the
    function rebinds it to the packed sequence (`x = pack_padded_sequence(x, ...)`, where
    `x.size(1)` would raise); then the one plain name it was copied from (`x = inputs`), if that
    is never packed in turn; else None (no fix is offered)."""
    def packed(values):
        return any(isinstance(v, ast.Call) and (resolve(v.func) or "").endswith("pack_padded_sequence")
                   for v in values)

    values = fn.local_values.get(name) or []
    if not packed(values):
        return name
    sources = [v for v in values if not packed([v])]
    if len(sources) == 1 and isinstance(sources[0], ast.Name) and not packed(fn.local_values.get(sources[0].id) or []):
        return sources[0].id
    return None


def _from_lengths(node, fn, depth) -> bool:
    """Is the value computed from a lengths tensor (`lengths[0]`, `lengths.max()`, `max(lens)`)?

    Local names are followed to what they are bound to, so `total_length = x.size(1)` is the
    padded size it is (the same on every replica), whatever the local is called.
    """
    if depth > 4:
        return False
    if isinstance(node, ast.Name):
        values = fn.local_values.get(node.id)
        if values:
            return any(_from_lengths(v, fn, depth + 1) for v in values)
        return "len" in node.id.lower()  # a parameter or global named like a lengths tensor
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("size", "dim"):
        return False  # a padded tensor's size
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return False
    return any(_from_lengths(child, fn, depth) for child in ast.iter_child_nodes(node)
               if isinstance(child, ast.expr))


def _repadded_to_argument(fn, call) -> bool:
    """After unpacking, `if out.size(1) != x_mask.size(1): out = torch.cat([out, padding], 1)`
    (DrQA's StackedBRNN): the output is padded up to the time length of an argument of this
    function, which DataParallel scattered whole along time, so every replica returns the same
    length."""
    params = {a.arg for a in (*fn.node.args.posonlyargs, *fn.node.args.args, *fn.node.args.kwonlyargs)}
    for node in fn.nodes(ast.If):
        if node.lineno <= call.lineno or not isinstance(node.test, ast.Compare) or len(node.test.ops) != 1 \
                or not isinstance(node.test.ops[0], (ast.NotEq, ast.Lt, ast.Gt)):
            continue
        sides = [node.test.left, node.test.comparators[0]]
        owners = [_size_owner(side) for side in sides]
        if None in owners:
            continue
        for out, other in (owners, owners[::-1]):
            if other in params and out not in params and any(
                    isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == out for t in stmt.targets)
                    for stmt in node.body):
                return True
    return False


def _size_owner(node) -> str | None:
    """`x` in `x.size(d)` or `x.shape[d]`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and isinstance(node.func.value, ast.Name):
        return node.func.value.id
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
            and isinstance(node.value.value, ast.Name):
        return node.value.value.id
    return None
