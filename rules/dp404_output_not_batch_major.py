"""
## What it does
Flags values returned from forward whose dim 0 is not the batch: `torch.stack(outputs)`
of per-layer or per-step batch tensors with the default `dim=0`, an RNN's final hidden
state `h_n` (shaped `(layers, B, H)`), a Parameter or buffer, a plain tensor attribute set outside
forward (`self.priors = Variable(...)` in `__init__`, moved or not), and a forward input
transposed so that dim 0 is no longer the batch (not a swap that undoes an earlier one of the same
name: `x = x.transpose(0, 1)` into a sequence-first RNN, then `x = x.transpose(0, 1)` back). A
returned Parameter or buffer is a warning: a class that returns its own weights is almost always
a layer used inside the wrapped model, not the model itself.

A list with one entry per sample is batch-major when stacked: a comprehension or loop over a
forward input (or a name unpacked from one), or over a list built empty and appended to once per
iteration of such a loop (DeepPurpose's per-molecule `(start, n_atoms)` offsets into a packed
tensor, read back as `[h.narrow(0, start, n).mean(0) for start, n in scope]`).

## Why is this bad?
Gather concatenates every output along dim 0. A `(layers, B, H)` tensor from two
replicas comes back as `(2 * layers, B/2, H)`: silently wrong, or a gather shape error
when the chunks are uneven. A weight returned from forward comes back N times stacked.

## How to fix
Return batch-first tensors: `torch.stack(outputs, dim=1)`, `h_n.transpose(0, 1)`;
read parameters off the model after the call instead of returning them.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import (
    is_true,
    keyword,
    parameters_of,
    rnn_kind,
    stacks_new_leading_dim,
    time_major_source,
)
from dpcheck.analysis.outputs import gathered_class, optional_severity, returned_leaves
from dpcheck.analysis.torch_api import RECURRENT_LAYERS
from dpcheck.analysis.wrapping import batch_dim_is_zero
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class OutputNotBatchMajor(Rule):
    code = "DP404"
    name = "output-not-batch-major"
    severity = Severity.ERROR
    wrapper_method = "gather"
    forward_code_only = True
    confirms = frozenset({K.OUTPUT_SHAPE_DIFFERS, K.GATHER_FAILED, K.VALUES_DIFFER, K.GRADS_DIFFER})
    summary = "An output whose dim 0 is not the batch is concatenated along the wrong axis by gather"
    fix_hint = "Return batch-first tensors (stack on dim=1, transpose h_n); read parameters off the model"
    bad_example = """
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

            def forward(self, x):
                hidden = []
                for layer in self.layers:
                    x = layer(x)
                    hidden.append(x)
                return x, torch.stack(hidden)
    """
    good_example = """
        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

            def forward(self, x):
                hidden = []
                for layer in self.layers:
                    x = layer(x)
                    hidden.append(x)
                return x, torch.stack(hidden, dim=1)
    """

    def check_class(self, model):
        if not gathered_class(model):
            return
        for leaf, fn, anchor in returned_leaves(model):
            why = _why(leaf, fn, model)
            if not why:
                continue
            if why.startswith(("the Parameter", "the buffer")):
                # Models return predictions; a class returning its own weights is almost always a
                # layer (embeddings, scales) consumed inside the wrapped model.
                yield self.violation(anchor, f"forward returns {why}: if this class is the wrapped model, "
                                     "DataParallel's gather stacks one copy per GPU along dim 0",
                                     severity=Severity.WARNING)
                continue
            if not why.startswith("the plain tensor attribute") and not batch_dim_is_zero(model):
                # Wrapped with `dim=k`: gather concatenates along k, where a hidden state or a
                # layers-first stack has its batch; only values with no batch dim stay wrong.
                continue
            yield self.violation(anchor, f"forward returns {why}: dim 0 is not the batch, so "
                                 "DataParallel's gather concatenates it along the wrong axis",
                                 severity=optional_severity(anchor, model, leaf))


def _why(leaf, fn, model) -> str | None:
    resolve = model.ctx.resolve
    if isinstance(leaf, ast.Call):
        name = resolve(leaf.func) or ""
        if name == "torch.stack" and stacks_new_leading_dim(leaf, fn):
            return "`torch.stack(...)` of a list on dim 0 (layers or steps first)"
        func = leaf.func
        if _swaps_batch_dim(leaf) and func.value.id in parameters_of(fn) \
                and len(_earlier_swaps(func.value.id, leaf, fn)) % 2 == 0:
            return f"the input `{func.value.id}` transposed"
        if fn.self_attr(func) is not None:
            source = time_major_source(leaf, fn, model)
            if source is not None:
                return (f"`{ast.unparse(func)}(...)` of `{ast.unparse(source)}` (line {source.lineno}), which "
                        f"keeps that layout")
    attr = fn.self_attr(leaf)
    if attr is not None:
        facts = model.attrs.get(attr)
        if facts is not None and facts.kinds & {"parameter", "buffer"}:
            return f"the {'Parameter' if 'parameter' in facts.kinds else 'buffer'} `self.{attr}`"
    attr = fn.self_attr(_strip_moves(leaf))
    if attr is not None:
        facts = model.attrs.get(attr)
        if facts is not None and not facts.registered and facts.kinds & {"tensor"} and facts.kinds <= _TENSOR_KINDS:
            # Built outside forward (model.attrs sees only that code), so without the batch.
            return f"the plain tensor attribute `self.{attr}`, set outside forward (no batch dim)"
    if isinstance(leaf, ast.Attribute) and leaf.attr in ("weight", "bias") and fn.self_attr(leaf.value):
        return f"the Parameter `{ast.unparse(leaf)}`"
    if isinstance(leaf, ast.Subscript) and isinstance(leaf.value, ast.Call):
        # `self.lstm(x)[1]` is (h_n, c_n)
        if _rnn_call(leaf.value, fn, model) and isinstance(leaf.slice, ast.Constant) and leaf.slice.value == 1:
            return "an RNN's final hidden state `h_n` (layers, B, H)"
    return _hidden_state_name(leaf, fn, model)


def _swaps_batch_dim(node) -> bool:
    """`x.transpose(0, 1)`, `x.t()`, `x.permute(1, 0, 2)` of a name: dim 0 moves elsewhere."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("transpose", "permute", "t", "swapaxes") and isinstance(node.func.value, ast.Name)):
        return False
    args = [a.value for a in node.args if isinstance(a, ast.Constant)]
    return node.func.attr == "t" or (args and 0 in args[:2] and args[:1] != [0]) or (
        node.func.attr == "transpose" and 0 in args)


def _earlier_swaps(name: str, leaf: ast.Call, fn) -> list[ast.AST]:
    """The rebindings of ``name`` before ``leaf`` that swap its dim 0 too (`x = x.transpose(0, 1)`,
    then a sequence-first RNN, then `x = x.transpose(0, 1)` back: OpenNRE's LSTM layer). An odd count
    means the returned swap puts the batch back in front."""
    return [value for value in fn.local_values.get(name, ())
            if _swaps_batch_dim(value) and value.func.value.id == name
            and getattr(value, "lineno", leaf.lineno) < leaf.lineno]  # (an unpacked item has no position)


_TENSOR_KINDS = frozenset({"tensor", "scalar_tensor", "constant", "other"})
# Calls that change where or how a tensor is stored, never its shape.
_MOVES = frozenset({"to", "cuda", "cpu", "type", "type_as", "detach", "float", "half", "double", "contiguous",
                    "clone"})


def _strip_moves(node):
    """`self.priors.to(x.device).float()` -> `self.priors`."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MOVES:
        node = node.func.value
    return node


def _rnn_call(call, fn, model) -> bool:
    kind = rnn_kind(model, fn.self_attr(call.func)) if isinstance(call, ast.Call) else None
    if kind not in RECURRENT_LAYERS:
        return False
    return True


def _hidden_state_name(leaf, fn, model) -> str | None:
    """`out, (h, c) = self.lstm(x)` / `out, h = self.gru(x)` then returning h or c."""
    if not isinstance(leaf, ast.Name):
        return None
    for node in fn.nodes(ast.Assign):
        if not (isinstance(node.value, ast.Call) and _rnn_call(node.value, fn, model)):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Tuple) and len(target.elts) == 2:
            second = target.elts[1]
            names = [second] if isinstance(second, ast.Name) else list(getattr(second, "elts", []))
            if any(isinstance(n, ast.Name) and n.id == leaf.id for n in names):
                kind = rnn_kind(model, fn.self_attr(node.value.func))
                batch_first = False
                for _, value, _ in model.attrs[fn.self_attr(node.value.func)].assignments:
                    if isinstance(value, ast.Call) and is_true(keyword(value, "batch_first")):
                        batch_first = True
                note = " (batch_first does not apply to it)" if batch_first else ""
                return f"the {kind}'s final hidden state `{leaf.id}` shaped (layers, B, H){note}"
    return None

