"""
## What it does
In training scripts, flags `torch.save(model.state_dict(), ...)` and
`model.load_state_dict(...)` where `model` holds an `nn.DataParallel` wrapper.

## Why is this bad?
The wrapper's state dict prefixes every key with `module.`. A checkpoint saved that way
does not load into the bare model (`Missing key(s) in state_dict: "conv1.weight" ...
Unexpected key(s) in state_dict: "module.conv1.weight"`), and a plain checkpoint does
not load into the wrapper. It shows up later, at evaluation or deployment.

## How to fix
Save and load the inner model: `torch.save(model.module.state_dict(), path)` and
`model.module.load_state_dict(...)`.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.findings import Applicability, Severity
from dpcheck.rule import Rule


class WrappedStateDict(Rule):
    code = "DP702"
    name = "wrapped-state-dict"
    severity = Severity.WARNING
    summary = "state_dict() of the DataParallel wrapper has `module.` prefixes that plain models reject"
    fix_hint = "Save and load model.module.state_dict() instead"
    bad_example = """
        model = nn.DataParallel(Net().cuda())
        torch.save(model.state_dict(), "checkpoint.pt")
    """
    good_example = """
        model = nn.DataParallel(Net().cuda())
        torch.save(model.module.state_dict(), "checkpoint.pt")
        model.module.load_state_dict(torch.load("checkpoint.pt"))
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for node in ctx.nodes(ast.Call):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            attr = node.func.attr
            wrap = facts.wrap_for(node.func.value)
            if wrap is None:
                continue
            if attr == "load_state_dict":
                yield self.violation(node, f"`{wrap.name}.load_state_dict(...)` on the DataParallel wrapper "
                                     "expects `module.`-prefixed keys: load into "
                                     f"`{wrap.name}.module` instead")
            elif attr == "state_dict" and _saved(node, facts, ctx):
                yield self.violation(node, f"Saving `{wrap.name}.state_dict()` of the DataParallel wrapper "
                                     "writes `module.`-prefixed keys that the bare model will not load",
                                     fix=self.offer_fix(f"Save `{wrap.name}.module.state_dict()`",
                                                        Applicability.SAFE))

    def fix(self, finding, editor):
        import libcst as cst

        call = editor.node  # `<wrapper>.state_dict()`
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
            inner = cst.Attribute(value=call.func.value, attr=cst.Name("module"))
            editor.replace(call, call.with_changes(func=call.func.with_changes(value=inner)))


def _saved(node, facts, ctx) -> bool:
    cur = facts.parent(node)
    while cur is not None and not isinstance(cur, ast.stmt):
        if isinstance(cur, ast.Call) and (ctx.resolve(cur.func) or "").endswith(("torch.save", "save_file")):
            return True
        cur = facts.parent(cur)
    parent = facts.parent(node)
    return isinstance(parent, ast.Assign)  # `state = model.state_dict()` then saved or copied
