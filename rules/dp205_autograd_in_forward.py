"""
## What it does
Flags autograd calls on the model's own parameters inside code that runs during
`forward`: `loss.backward()`, `self.zero_grad()` / `optimizer.zero_grad()`,
`torch.autograd.grad(..., self.parameters())` and `torch.autograd.backward(...)`.

## Why is this bad?
DataParallel replicas hold non-leaf copies of the parameters, made differentiably
from the originals. Backward inside a replica's forward accumulates into the
originals from N threads at once, before the real backward through gather; gradients
explode or double. `zero_grad()` on a replica does nothing but warn (`Calling
.zero_grad() from a module created with nn.DataParallel() has no effect`), and
`autograd.grad` with respect to `self.parameters()` gets an empty list on a replica.

## How to fix
Return what the penalty needs and compute it in the training loop, on the gathered
output; call `backward()` and `zero_grad()` there.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.context import code_names
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class AutogradInForward(Rule):
    code = "DP205"
    name = "autograd-in-forward"
    severity = Severity.ERROR
    forward_code_only = True
    confirms = frozenset({K.GRADS_DIFFER})
    summary = "backward(), zero_grad() or autograd.grad on parameters inside forward breaks on replicas"
    fix_hint = "Compute gradients and penalties in the training loop, on the gathered output"
    bad_example = """
        class SelfTraining(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                out = self.fc(x)
                self.zero_grad()
                out.sum().backward()
                return out
    """
    good_example = """
        class GradientPenalty(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)

            def forward(self, x):
                x = x.requires_grad_(True)
                out = self.fc(x)
                grad, = torch.autograd.grad(out.sum(), x, create_graph=True)
                return out, grad
    """

    def check_class(self, model):
        if not model.ctx.fact(_may_call_autograd):
            return
        named_calls = model.ctx.named_calls
        for fn in model.reachable:
            for call, name in named_calls(fn):
                func = call.func
                if isinstance(func, ast.Attribute) and func.attr == "backward" and name != "torch.autograd.backward":
                    yield self.violation(call, "`.backward()` inside forward runs in every DataParallel replica "
                                         "thread on non-leaf parameter copies: gradients accumulate N times "
                                         "before the real backward")
                elif isinstance(func, ast.Attribute) and func.attr == "zero_grad":
                    yield self.violation(call, "`zero_grad()` inside forward has no effect on DataParallel "
                                         "replicas (their parameters are not leaves)")
                elif name == "torch.autograd.backward":
                    yield self.violation(call, "`torch.autograd.backward` inside forward runs once per replica "
                                         "thread on non-leaf parameter copies")
                elif name == "torch.autograd.grad" and len(call.args) >= 2 and _mentions_parameters(call.args[1], fn):
                    yield self.violation(call, "`torch.autograd.grad` with respect to the module's parameters "
                                         "inside forward: on a replica `parameters()` is empty and its "
                                         "weights are non-leaf copies")


def _may_call_autograd(ctx) -> bool:
    """Can a call of this file be `.backward()`, `.zero_grad()` or `torch.autograd.*`?"""
    names = ctx.fact(code_names)
    return "backward" in names or "zero_grad" in names or "autograd" in names


def _mentions_parameters(node, fn) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                and sub.func.attr in ("parameters", "named_parameters"):
            return True
        if fn.self_attr(sub) is not None:
            return True
    return False
