"""
## What it does
Flags a `forward` that receives a `PackedSequence`: an argument annotated
`PackedSequence` (an error), or one that forward tests with `isinstance(arg, PackedSequence)`
(a warning: forward accepts packed input, but callers may pass padded tensors only); and a
`forward` that hands one of its own parameters to `pad_sequence` or `pack_sequence`: it
receives a Python list of variable-length per-sample sequences (an error).

## Why is this bad?
`PackedSequence` is a namedtuple, so DataParallel's scatter chunks each of its fields,
`data`, `batch_sizes`, `sorted_indices`, independently along dim 0. The replicas get
fields that no longer describe each other: garbage, or errors deep inside the RNN.
A list of per-sample sequences is a container too: scatter cuts each sequence along its own
dim 0, its time axis, so every replica gets every sample cut to a piece of its length, and
attention or the RNN sees only that piece; the gathered output has the right shape.

## How to fix
Pass the padded tensor and the lengths (as a tensor) and pack inside forward, with
`enforce_sorted=False` (pad a list of sequences before the call, not inside forward).
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import parameters_of
from dpcheck.analysis.outputs import gathered_class
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule

# torch.nn.utils.rnn functions whose first argument is a list of per-sample sequences.
_SEQUENCE_LIST_FUNCTIONS = frozenset({"torch.nn.utils.rnn.pad_sequence", "torch.nn.utils.rnn.pack_sequence"})


class PackedSequenceArgument(Rule):
    code = "DP503"
    name = "packed-sequence-argument"
    severity = Severity.ERROR
    wrapper_method = "scatter"
    forward_code_only = True
    confirms = frozenset({K.ARGUMENT_LIST_SPLIT_PER_ELEMENT, K.ARGUMENT_PACKED_SEQUENCE_SPLIT})
    summary = "A PackedSequence passed to forward has its fields scattered independently"
    fix_hint = "Pass padded tensors plus lengths and pack inside forward"
    bad_example = """
        from torch.nn.utils.rnn import PackedSequence

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(8, 8)

            def forward(self, packed: PackedSequence):
                out, _ = self.rnn(packed)
                return out
    """
    good_example = """
        from torch.nn.utils.rnn import pack_padded_sequence

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(8, 8, batch_first=True)

            def forward(self, x, lengths):
                packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
                out, hidden = self.rnn(packed)
                return hidden.transpose(0, 1)
    """

    def check_class(self, model):
        fn = model.forward
        if fn is None or not gathered_class(model):
            return  # only the wrapped model's own arguments are scattered
        resolve = model.ctx.resolve
        args = fn.node.args
        for arg in args.posonlyargs + args.args + args.kwonlyargs:
            annotation = arg.annotation
            if annotation is None:
                continue
            names = {resolve(n) or "" for kind in (ast.Name, ast.Attribute) for n in fn.nodes_under(annotation, kind)}
            if any(n.endswith("PackedSequence") for n in names):
                yield self._finding(arg)
        params = set(parameters_of(fn))
        for call in fn.nodes(ast.Call):
            if isinstance(call.func, ast.Name) and call.func.id == "isinstance" and len(call.args) == 2 \
                    and isinstance(call.args[0], ast.Name) and call.args[0].id in params \
                    and (resolve(call.args[1]) or "").endswith("PackedSequence"):
                yield self._finding(call.args[0], Severity.WARNING)
            elif call.args and isinstance(call.args[0], ast.Name) and call.args[0].id in params \
                    and (resolve(call.func) or "") in _SEQUENCE_LIST_FUNCTIONS \
                    and not _rebound_before(fn, call.args[0].id, call):
                name, function = call.args[0].id, resolve(call.func).rsplit(".", 1)[-1]
                yield self.violation(call.args[0], f"forward hands `{name}` to `{function}`, so it receives a list of "
                                     "per-sample sequences: DataParallel scatters each sequence of the list along "
                                     "its own dim 0 (its time axis), so every replica gets every sample cut to a "
                                     "piece of its length")

    def _finding(self, node, severity=None):
        name = getattr(node, "arg", None) or getattr(node, "id", "?")
        how = "receives" if severity is None else "accepts"
        return self.violation(node, f"forward {how} `{name}` as a PackedSequence: DataParallel scatters "
                              "its data, batch_sizes and sorted_indices fields independently", severity=severity)

    def matches(self, finding, observation, ran):
        # The DataParallel step failed on a PackedSequence.
        return super().matches(finding, observation, ran) or (
            ran and observation.raised and bool(observation.details.get("mentions_packed_sequence")))


def _rebound_before(fn, name: str, call: ast.Call) -> bool:
    """Does forward assign ``name`` before ``call`` (`x = list(x.unbind(0))`: no longer the argument)?"""
    return any(isinstance(t, ast.Name) and t.id == name and node.lineno < call.lineno
               for node in fn.nodes(ast.Assign) for target in node.targets for t in ast.walk(target))
