"""
## What it does
Flags `torch.compile` combined with `nn.DataParallel` in either order:
`nn.DataParallel(torch.compile(net))`, wrapping a model that was compiled
(`net.compile()`, `net = torch.compile(net)`), and `torch.compile(model)` or
`model.compile()` on a DataParallel wrapper; and a model class that compiles a submodule
in its constructor (`self.encoder = torch.compile(Encoder())`) when a scanned script wraps
that class. Compiling a plain function (`self.fn = torch.compile(helper)`) is fine.

## Why is this bad?
Observed on PyTorch 2.11 with two GPUs: `m.compile()` then `DataParallel(m)` fails with
a device mismatch (replicas call the original's compiled `_call_impl`);
`DataParallel(torch.compile(m))` fails with `AttributeError: 'Linear' object has no
attribute 'weight'` inside the traced replica; `torch.compile(DataParallel(m))` runs,
but dynamo graph-breaks on DataParallel's threading, so nothing is compiled. A compiled
submodule inside a wrapped model makes replica 0 raise (measured on 2 GPUs): replicate
copies the OptimizedModule, whose compiled code still refers to the original's parameters.

## How to fix
Use DistributedDataParallel with `torch.compile`, or drop one of the two.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.classes import WRAPPED_CONDITION
from dpcheck.analysis.names import self_attr
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.analysis.torch_api import FUNCTION_DEFS
from dpcheck.findings import Severity
from dpcheck.rule import TRAINING_SCRIPT, Rule


class CompileWithDataParallel(Rule):
    code = "DP706"
    name = "compile-with-dataparallel"
    severity = Severity.ERROR
    not_confirmable = TRAINING_SCRIPT
    summary = "torch.compile and nn.DataParallel do not combine: errors or no compilation"
    fix_hint = "Use DistributedDataParallel with torch.compile, or drop one of them"
    bad_example = """
        net = torch.compile(Net().cuda())
        model = nn.DataParallel(net)
    """
    good_example = """
        net = Net().cuda()
        model = nn.DataParallel(net)
        fast = torch.compile(Net().cuda())
    """

    def check_class(self, model):
        from dpcheck.analysis.wrapping import WRAPPED

        ctx = model.ctx
        for name, facts in model.attrs.items():
            for _, value, _ in facts.assignments:
                if not (isinstance(value, ast.Call) and _is_compile(value, ctx) and value.args) \
                        or _compiles_function(value.args[0], ctx) \
                        or model.find_method(self_attr(value.args[0]) or "") is not None:
                    continue  # a function or a bound method: no module state to replicate
                requires = () if model.wrap_evidence == WRAPPED \
                    else (frozenset({f"{WRAPPED_CONDITION}{model.info.qualname}"}),)
                yield self.violation(value, f"`self.{name}` is a torch.compile'd module inside `{model.name}`, "
                                     "which a script wraps in nn.DataParallel: the replicas' compiled code "
                                     "refers to the original's parameters and replica 0 raises", requires=requires)

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        compiled = _compiled_names(ctx)
        for call in facts.dp_calls:
            inner = call.args[0] if call.args else None
            requires = tuple(frozenset({c}) for c in sorted(facts.source_of(call).requires))
            if isinstance(inner, ast.Call) and _is_compile(inner, ctx):
                yield self._finding(call, "wraps a torch.compile'd model", requires)
            elif isinstance(inner, ast.Name) and any(line < call.lineno for line in compiled.get(inner.id, ())):
                yield self._finding(call, f"wraps `{inner.id}`, which was compiled before", requires)
        for node in ctx.nodes(ast.Call):
            target = node.args[0] if _is_compile(node, ctx) and node.args else node.func.value \
                if isinstance(node.func, ast.Attribute) and node.func.attr == "compile" else None
            wrap = facts.wrap_for(target) if target is not None else None
            if wrap is not None:
                yield self._finding(node, "compiles a DataParallel wrapper (dynamo graph-breaks on it)",
                                    wrap.requires)

    def _finding(self, node, what, requires=()):
        return self.violation(node, f"This {what}: torch.compile and nn.DataParallel fail together or "
                              "compile nothing", requires=requires)


def _is_compile(call, ctx) -> bool:
    return (ctx.resolve(call.func) or "") == "torch.compile"


def _compiles_function(arg, ctx) -> bool:
    """`torch.compile(fn)` of a plain function or lambda (not a module)."""
    if isinstance(arg, ast.Lambda):
        return True
    if isinstance(arg, ast.Name):
        return any(isinstance(n, FUNCTION_DEFS) and n.name == arg.id
                   for n in ctx.tree.body)
    name = ctx.resolve(arg) or ""
    return name.startswith("torch.") and not name.rsplit(".", 1)[-1][:1].isupper()


def _compiled_names(ctx) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for node in ctx.nodes(ast.Assign, ast.Call):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _is_compile(node.value, ctx):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compile" \
                and isinstance(node.func.value, ast.Name):
            found.setdefault(node.func.value.id, []).append(node.lineno)
    return found
