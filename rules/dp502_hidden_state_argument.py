"""
## What it does
Flags a forward argument that is passed to an RNN as its initial hidden state
(`self.lstm(x, hidden)`, `self.gru(x, h0)`, `hx=state`). A default that forward fills in only
when the caller passes none (`if hidden is None: hidden = torch.zeros(...)`) still lets a passed
state through: a warning, and an error where a call through the wrapper passes it.

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
from dpcheck.analysis.guards import wrapper_passes_condition
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
                if not (isinstance(sub, ast.Name) and sub.id in params):
                    continue
                rebound = _rebindings_before(fn, sub.id, call.lineno)
                if not all(_default_filled_in(fn, node, sub.id) for node in rebound):
                    continue
                passed = wrapper_passes_condition(model, sub.id) if rebound else None
                yield self.violation(sub, f"forward argument `{sub.id}` is an RNN hidden state shaped "
                                     "(layers, B, H): DataParallel splits it along layers, not batch"
                                     + (" (forward builds its own only when none is passed)" if rebound else ""),
                                     subject=Subject(argument=sub.id),
                                     # Filled in when left out: a hazard where a call through the wrapper passes it.
                                     **({"severity": Severity.WARNING, "error_if": passed} if passed else {}))

    def matches(self, finding, observation, ran):
        # Keyword and positional arguments chunked differently made the replica's call fail.
        return super().matches(finding, observation, ran) or (
            ran and observation.kind == K.KEYWORD_CHUNK_MISMATCH and observation.raised)


def _rebindings_before(fn, name, line) -> list[ast.stmt]:
    """The assignments to the argument `name` on lines before ``line``. Any of them but a default
    filled in only when the caller passed none (``_default_filled_in``) means the RNN no longer
    gets the input."""
    return [node for node in fn.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign)
            if node.lineno < line and any(isinstance(t, ast.Name) and t.id == name
                                          for target in (node.targets if isinstance(node, ast.Assign)
                                                         else [node.target]) for t in ast.walk(target))]


def _default_filled_in(fn, stmt, name) -> bool:
    """Does ``stmt`` rebind ``name`` only when the caller left it out? A rebinding under `if name is
    None:` (or `if not name:`, the `else` of `if name is not None:`), or `name = name if name is not
    None else ...`, keeps the caller's state whenever one is given."""
    value = getattr(stmt, "value", None)
    if isinstance(value, ast.IfExp) and any(isinstance(side, ast.Name) and side.id == name
                                            for side in (value.body, value.orelse)) \
            and _tests_missing(value.test, name) is not None:
        return True  # `h = h if h is not None else zeros(...)`, `h = zeros(...) if h is None else h`
    child, parent = stmt, fn.parent(stmt)
    while parent is not None and parent is not fn.node:
        if isinstance(parent, ast.If):
            missing = _tests_missing(parent.test, name)
            if missing is not None and any(child is s for s in (parent.body if missing else parent.orelse)):
                return True
        child, parent = parent, fn.parent(parent)
    return False


def _tests_missing(test, name) -> bool | None:
    """True where ``test`` holds when `name` is missing (`name is None`, `not name`, also as one operand
    of `and`/`or`), False where it holds when `name` is given (`name is not None`), else None."""
    if isinstance(test, ast.BoolOp):
        found = {_tests_missing(v, name) for v in test.values} - {None}
        return found.pop() if len(found) == 1 else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
            and isinstance(test.operand, ast.Name) and test.operand.id == name:
        return True
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and test.left.id == name and isinstance(test.comparators[0], ast.Constant) \
            and test.comparators[0].value is None:
        op = test.ops[0]
        if isinstance(op, (ast.Is, ast.Eq)):
            return True
        if isinstance(op, (ast.IsNot, ast.NotEq)):
            return False
    return None
