"""
## What it does
In training scripts, flags calls of a DataParallel-wrapped model inside
`with torch.autocast(..., dtype=...)` (or `torch.cuda.amp.autocast(dtype=...)`,
`torch.amp.autocast(...)`) with a dtype other than float16.

## Why is this bad?
`parallel_apply` re-enters autocast in each replica thread with only `enabled=`; the
autocast dtype is thread-local and falls back to the default, float16. Under
`torch.autocast("cuda", dtype=torch.bfloat16)` the replicas compute in float16
(measured on PyTorch 2.11), silently: models tuned for bfloat16 can overflow to inf or
NaN.

## How to fix
Enter autocast *inside* the model's forward
(`with torch.autocast("cuda", dtype=torch.bfloat16):` at its top), where each replica
thread sets it for itself.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import keyword
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule

_AUTOCAST = ("torch.autocast", "torch.cuda.amp.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast_mode.autocast")


class AutocastDtypeNotPropagated(Rule):
    code = "DP707"
    name = "autocast-dtype-not-propagated"
    severity = Severity.ERROR
    not_confirmable = TRAINING_SCRIPT
    summary = "Replicas ignore the autocast dtype (bfloat16 becomes float16) in DataParallel threads"
    fix_hint = "Enter torch.autocast with the dtype inside the model's forward"
    bad_example = """
        model = nn.DataParallel(Net().cuda())
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
    """
    good_example = """
        model = nn.DataParallel(Net().cuda())
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(x)
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for node in ctx.nodes(ast.With, ast.AsyncWith):
            if not isinstance(node, (ast.With, ast.AsyncWith)):
                continue
            dtype, severity = None, None
            for item in node.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call) and (ctx.resolve(expr.func) or "") in _AUTOCAST:
                    value = keyword(expr, "dtype")
                    if value is not None and ast.unparse(value).rsplit(".", 1)[-1] not in ("float16", "half"):
                        dtype = ast.unparse(value)
                        # `dtype16 = torch.float16 if fp16 else torch.bfloat16`: bfloat16 only behind an option.
                        if isinstance(value, ast.Name) and any(
                                ast.unparse(v).rsplit(".", 1)[-1] in ("float16", "half")
                                for v in _values(value.id, ctx)):
                            severity = Severity.WARNING
            if dtype is None:
                continue
            for stmt in node.body:
                for call in ast.walk(stmt):
                    if isinstance(call, ast.Call) and facts.called_wrap(call) is not None:
                        wrap = facts.called_wrap(call)
                        yield self.violation(call, f"`{ast.unparse(call.func)}` is DataParallel-wrapped and "
                                             f"called under autocast with dtype={dtype}: the replica threads "
                                             "get only `enabled`, and compute in float16", severity=severity,
                                             requires=wrap.requires)


def _values(name, ctx):
    """Every value assigned to ``name`` anywhere in the file (both arms of an if, a conditional expression)."""
    for node in ctx.nodes(ast.Assign):
        if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            yield from (node.value.body, node.value.orelse) if isinstance(node.value, ast.IfExp) else (node.value,)
