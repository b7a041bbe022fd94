"""
## What it does
Flags a call of an `nn.DataParallel` wrapper in a training script that passes a Python
list built per sample: `x.tolist()`, a list comprehension over the batch, `[len(s) for s
in batch]`, `list(...)`, a list literal, directly or through a local name.

## Why is this bad?
DataParallel's scatter splits only tensors along dim 0. A list of Python numbers is
handed whole to every replica, which pairs its B/N chunk of the tensors with all B
entries: `pack_padded_sequence` raises `Expected len(lengths) to be equal to batch_size`,
or the replica silently uses the lengths or labels of other samples. (A list of tensors
is split element by element instead, which is rarely what was meant either.)

## How to fix
Pass per-sample values as a tensor with a batch dimension (`torch.tensor(lengths)`), so
that it is split together with the batch; convert it back inside forward if needed.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class PythonListArgument(Rule):
    code = "DP504"
    name = "python-list-argument"
    severity = Severity.ERROR
    summary = "A Python list passed to a DataParallel model reaches every replica whole"
    fix_hint = "Pass per-sample values as a tensor with a batch dimension (torch.tensor(lengths))"
    bad_example = """
        model = nn.DataParallel(Tagger().cuda())
        for padded, lengths in loader:
            scores = model(padded.cuda(), lengths.tolist())
    """
    good_example = """
        model = nn.DataParallel(Tagger().cuda())
        for padded, lengths in loader:
            scores = model(padded.cuda(), lengths)
    """

    def check_file(self, ctx):
        if not mentions_dataparallel(ctx):
            return
        facts = script_facts(ctx)
        for call in ctx.nodes(ast.Call):
            if facts.wrap_for(call.func) is None:
                continue
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                why = _python_list(arg, call, ctx, facts)
                if why:
                    yield self.violation(arg, f"{why} passed to the DataParallel model: scatter splits only "
                                         "tensors, so every replica gets the whole list with its B/N chunk "
                                         "of the batch")


def _python_list(node, call, ctx, facts, depth=0) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "tolist" \
            and not node.args:
        return f"`{ast.unparse(node)}` (a Python list)"
    if isinstance(node, ast.ListComp):
        return "a list comprehension"
    if isinstance(node, ast.List) and node.elts and not any(isinstance(e, ast.Starred) for e in node.elts):
        return "a list literal"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list":
        return "`list(...)`"
    if isinstance(node, ast.Name) and depth == 0:
        value = _last_binding(node, call, ctx, facts)
        if value is not None:
            why = _python_list(value, call, ctx, facts, depth + 1)
            return f"`{node.id}`, {why}," if why else None
    return None


def _last_binding(name, call, ctx, facts):
    """The value last assigned to ``name`` before ``call`` in the same function (or module)."""
    scope = facts.scope_of(call)
    best = None
    for node in ctx.nodes(ast.Assign):
        if node.lineno >= call.lineno or facts.scope_of(node) is not scope:
            continue
        if any(isinstance(t, ast.Name) and t.id == name.id for t in node.targets) \
                and (best is None or node.lineno > best.lineno):
            best = node
    return best.value if best is not None else None
