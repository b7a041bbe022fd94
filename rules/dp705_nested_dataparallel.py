"""
## What it does
Flags an `nn.DataParallel` wrapped around another `nn.DataParallel`:
`nn.DataParallel(nn.DataParallel(net))`, or wrapping a name that already holds a
wrapper (often a helper that wraps again a model its caller already wrapped, or a builder
that returns one), or wrapping a module whose constructor was handed a wrapper and keeps it as a
submodule it calls (`DataParallel(Holder(nn.DataParallel(net)))`, the holder's `__init__` doing
`self.net = net` and a method calling `self.net(...)`, in this file or another). One wrapper in each
arm of an `if`/`else` is not nesting.

## Why is this bad?
On more than one GPU it crashes at the first call. The outer wrapper replicates the inner
one onto every device; the inner wrapper's forward on replica 1 finds its module's buffers
on cuda:1, not its `device_ids[0]` ("module must have its parameters and buffers on device
cuda:0 ... but found one of them on device: cuda:1"), and a model without buffers fails
one step later, when the inner wrapper scatters its chunk to devices whose replicas still
hold cuda:1 weights (replicas have no parameters of their own to broadcast). On one GPU
or none DataParallel calls the module directly and the nesting only costs. Its
state dict keys get a `module.module.` prefix that nothing else loads.

This is an error, not cost only: the second wrap is typically in a multi-GPU branch
(`if n_gpu > 1:`), exactly where it fails (transformers fixed its `run_*.py` examples'
evaluation-time re-wrap for this error, huggingface/transformers#3842).

## How to fix
Wrap once; check `isinstance(model, nn.DataParallel)` before wrapping in helpers.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.analysis.wrapping import KEPT_MODULE_CONDITION
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule


class NestedDataParallel(Rule):
    code = "DP705"
    name = "nested-dataparallel"
    severity = Severity.ERROR
    not_confirmable = TRAINING_SCRIPT
    summary = "DataParallel inside DataParallel fails on more than one GPU (replica devices); keys get module.module."
    fix_hint = "Wrap once; test isinstance(model, nn.DataParallel) before wrapping"
    bad_example = """
        model = nn.DataParallel(Net().cuda())
        model = nn.DataParallel(model)
    """
    good_example = """
        model = Net().cuda()
        if not isinstance(model, nn.DataParallel):
            model = nn.DataParallel(model)
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in facts.dp_calls:
            inner = call.args[0] if call.args else None
            if inner is None:
                continue
            source = facts.wrapper_value(inner)
            # `self.net = self.net.cuda()` in another method carries this very wrapper back to its
            # own argument (`self.net = DataParallel(self.net)`): a wrapper never wraps itself.
            if source is not None and source.call is not call:
                requires = tuple(frozenset({c}) for c in sorted(source.requires | facts.source_of(call).requires))
                yield self.violation(call, "This DataParallel wraps a model that is already wrapped in "
                                     "DataParallel: on more than one GPU the inner wrapper's replicas find their "
                                     "module off its device_ids[0] and the first call fails, and state dict keys "
                                     "get `module.module.`", requires=requires,
                                     fix=self.offer_fix("Remove the second DataParallel wrapper"))
                continue
            yield from self._wrapper_kept_by_constructor(call, inner, facts)

    def _wrapper_kept_by_constructor(self, call, inner, facts):
        """`DataParallel(holder)` where `holder = Holder(wrapper, ...)`: the holder's class keeps that
        argument as a submodule it calls (a cross-file condition the project index settles)."""
        built = facts.constructed_value(inner)
        if built is None:
            return
        resolved = facts.ctx.resolve(built.func)
        if not resolved or any(isinstance(a, ast.Starred) for a in built.args):
            return
        handed = [(f"@{k}", arg) for k, arg in enumerate(built.args)]
        handed += [(k.arg, k.value) for k in built.keywords if k.arg is not None]
        for where, arg in handed:
            source = facts.wrapper_value(arg)
            if source is None or source.call is call:
                continue
            requires = tuple(frozenset({c}) for c in sorted(source.requires | facts.source_of(call).requires))
            requires += (frozenset({f"{KEPT_MODULE_CONDITION}{resolved}:{where}"}),)
            yield self.violation(call, f"This DataParallel wraps `{ast.unparse(built.func)}(...)`, whose constructor "
                                 f"keeps `{ast.unparse(arg)}`, a DataParallel wrapper, as a submodule it calls: on "
                                 "more than one GPU the inner wrapper's replicas find their module off its "
                                 "device_ids[0] and the first call fails", requires=requires)
            return

    def fix(self, finding, editor):
        import libcst as cst

        call = editor.node  # the outer DataParallel(...)
        if not isinstance(call, cst.Call) or not call.args or call.args[0].keyword is not None:
            return
        inner = call.args[0].value
        parent = editor.parent(call)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and \
                parent.targets[0].target.deep_equals(inner):
            line = editor.enclosing(parent, cst.SimpleStatementLine)
            if line is not None and len(line.body) == 1:  # `model = DataParallel(model)`: drop it
                editor.replace(line, cst.RemovalSentinel.REMOVE)
                return
        editor.replace(call, inner.with_changes(lpar=call.lpar, rpar=call.rpar) if call.lpar else inner)
