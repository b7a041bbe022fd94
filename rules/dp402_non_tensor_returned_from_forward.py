"""
## What it does
Flags Python values returned from a model's `forward`, alone or inside a tuple, list
or dict: `.item()`, `.tolist()`, numbers, strings, `len(...)`, `float(...)`,
instances of dataclasses and of plain classes (`class QuantizationOutput():`, no base, no
decorator, no `__iter__`/`__getitem__`), and `torch.distributions` objects (a policy head's
`Normal(mean, std)`, also through a module-level alias or a subclass defined in the file). Also
what a layer returns where every construction of it is of a project class, of this file or
another, whose own forward returns such a value on every return (`q = self.vq_layer(z)` returned
as it came, the quantizer's forward ending in `return QuantizationOutput(quantized, loss)`).

A value returned only in eval mode (under `if not self.training:`, or the `else:` of `if
self.training:`) is latent, a warning, where the scanned files wrap a model and none puts one in
eval mode (no `.eval()`, `.train(False)`, no library trainer): a module starts in training mode. A
file counts only where a wrapping script loads it (by its imports): a test script that builds its model
bare and that no wrapping script imports evaluates only that model. It is an error where some file
that runs with a wrapped model may evaluate.

## Why is this bad?
DataParallel's gather only understands tensors, `None`, and tuples, lists, dicts and
namedtuples of them. A float raises `TypeError: 'float' object is not iterable`; a
string is *silently* replaced by `'<map object at 0x...>'`; a dataclass or a plain object raises
`TypeError: 'Output' object is not iterable`, and so does a Distribution (`'Normal' object is
not iterable`).

## How to fix
Return tensors (keep a batch dimension) or containers of tensors; compute Python
numbers after the forward pass. Return a distribution's parameters (or a sample and its
log-probability) and build the distribution from the gathered tensors.
"""

from __future__ import annotations

from dpcheck.analysis.guards import EVAL_MODE_LATENT, EVAL_MODE_NOTE, eval_mode_only
from dpcheck.analysis.outputs import (
    gathered_class,
    non_tensor_reason,
    optional_severity,
    reason_requires,
    returned_leaves,
)
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class NonTensorReturnedFromForward(Rule):
    code = "DP402"
    name = "non-tensor-returned-from-forward"
    severity = Severity.ERROR
    wrapper_method = "gather"
    forward_code_only = True
    confirms = frozenset({K.OUTPUT_STRUCTURE_DIFFERS, K.OUTPUT_VALUE_DIFFERS, K.GATHER_FAILED})
    summary = ("Python numbers, strings, dataclasses, plain objects or distributions returned from forward break "
               "DataParallel's gather")
    fix_hint = "Return tensors (or tuples/dicts of tensors); convert to Python values after forward"
    bad_example = """
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                out = self.fc(x)
                return out, out.max().item()
    """
    good_example = """
        class Scorer(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                out = self.fc(x)
                return out, None
    """

    def check_class(self, model):
        if not gathered_class(model):
            return
        for leaf, fn, anchor in returned_leaves(model):
            reason = non_tensor_reason(leaf, fn, model)
            if reason:
                message = f"forward returns {reason}: DataParallel's gather only handles tensors and containers " \
                          "of tensors"
                severity = optional_severity(anchor, model, leaf)
                if severity is None and (eval_mode_only(fn, leaf) or eval_mode_only(model.forward, anchor)):
                    yield self.violation(anchor, message + EVAL_MODE_NOTE, requires=reason_requires(reason),
                                         **EVAL_MODE_LATENT)
                else:
                    yield self.violation(anchor, message, severity=severity, requires=reason_requires(reason))

