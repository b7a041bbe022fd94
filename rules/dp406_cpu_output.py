"""
## What it does
Flags values moved off the GPU and returned from forward: `.cpu()`, `.numpy()`, alone
or inside a returned tuple, list or dict. (`.tolist()` and `.item()` are DP402.)

## Why is this bad?
Gather only concatenates GPU tensors: a CPU tensor fails with `AssertionError: Gather
function not implemented for CPU tensors`, and a numpy array with `TypeError: expected
a sequence of integers or a single integer, got '<map object ...>'`.

## How to fix
Return the GPU tensor and move it to the CPU after the DataParallel call.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.outputs import gathered_class, optional_severity, returned_leaves
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule

_OFF_GPU = ("cpu", "numpy")


class CpuOutput(Rule):
    code = "DP406"
    name = "cpu-output"
    severity = Severity.ERROR
    wrapper_method = "gather"
    forward_code_only = True
    confirms = frozenset({K.GATHER_FAILED})
    summary = "CPU tensors or numpy arrays returned from forward cannot be gathered"
    fix_hint = "Return GPU tensors; call .cpu()/.numpy() on the gathered output"
    bad_example = """
        class Embedder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x).detach().cpu()
    """
    good_example = """
        class Embedder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                return self.fc(x).detach()

            def embed_numpy(self, x):
                return self.fc(x).cpu().numpy()
    """

    def check_class(self, model):
        if not gathered_class(model):
            return
        for leaf, fn, anchor in returned_leaves(model):
            method = _off_gpu(leaf, fn)
            if method:
                what = "a numpy array" if method == "numpy" else "a CPU tensor"
                yield self.violation(anchor, f"forward returns {what} (`.{method}()`): DataParallel's "
                                     "gather only handles GPU tensors",
                                     severity=optional_severity(anchor, model, leaf))


def _off_gpu(node, fn) -> str | None:
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in _OFF_GPU and not node.args:
            return node.func.attr
        if node.func.attr not in ("detach", "float", "long", "clone", "contiguous", "squeeze", "view", "reshape"):
            return None
        node = node.func.value
    return None

