"""
## What it does
Flags a forward argument that is passed to an RNN as its initial hidden state
(`self.lstm(x, hidden)`, `self.gru(x, h0)`, `hx=state`).

## Why is this bad?
An RNN's hidden state is shaped `(num_layers, B, H)`: the batch is dim 1, even with
`batch_first=True`. DataParallel splits every tensor argument along dim 0, so each
replica gets a slice of the *layers*; with one layer, dim 0 has size 1, the scatter
produces a single chunk and the zip of arguments truncates to one replica, which then
silently processes only part of the batch (or of the time steps).

## How to fix
Create the initial state inside forward from the input's batch size, or pass it
batch-first (`(B, layers, H)`) and transpose inside forward.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import argument, parameters_of, rnn_kind
from dpcheck.analysis.outputs import gathered_class
from dpcheck.analysis.torch_api import RECURRENT_LAYERS
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity, Subject
from dpcheck.rule import Rule


class HiddenStateArgument(Rule):
    code = "DP502"
    name = "hidden-state-argument"
    severity = Severity.ERROR
    wrapper_method = "scatter"
    forward_code_only = True
    # An LSTM's (h, c) tuple is scattered element by element, each along layers.
    confirms = frozenset({K.ARGUMENT_NOT_BATCH_SPLIT, K.ARGUMENT_LIST_SPLIT_PER_ELEMENT, K.VALUES_DIFFER})
    summary = "An RNN hidden state (layers, B, H) passed into forward is split along layers"
    fix_hint = "Build the initial state inside forward, or pass it batch-first and transpose inside"
    bad_example = """
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(8, 8, batch_first=True)

            def forward(self, x, hidden):
                out, hidden = self.gru(x, hidden)
                return out
    """
    good_example = """
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(8, 8, batch_first=True)

            def forward(self, x, hidden_bf):
                hidden = hidden_bf.transpose(0, 1).contiguous()
                out, _ = self.gru(x, hidden)
                return out
    """

    def check_class(self, model):
        fn = model.forward
        if fn is None or not gathered_class(model):
            return  # only the wrapped model's own arguments are scattered
        params = set(parameters_of(fn))
        for call in fn.nodes(ast.Call):
            if rnn_kind(model, fn.self_attr(call.func)) not in RECURRENT_LAYERS:
                continue
            state = argument(call, 1, "hx")
            names = [n for n in ast.walk(state)] if state is not None else []
            for sub in names:
                if isinstance(sub, ast.Name) and sub.id in params and not _rebound_before(fn, sub.id, call.lineno):
                    yield self.violation(sub, f"forward argument `{sub.id}` is an RNN hidden state shaped "
                                         "(layers, B, H): DataParallel splits it along layers, not batch",
                                         subject=Subject(argument=sub.id))

    def matches(self, finding, observation, ran):
        # Keyword and positional arguments chunked differently made the replica's call fail.
        return super().matches(finding, observation, ran) or (
            ran and observation.kind == K.KEYWORD_CHUNK_MISMATCH and observation.raised)


def _rebound_before(fn, name, line) -> bool:
    """Was the argument `name` reassigned on a line before ``line`` (so it is no longer the input)?"""
    for node in fn.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if node.lineno < line and any(isinstance(t, ast.Name) and t.id == name
                                      for target in targets for t in ast.walk(target)):
            return True
    return False
