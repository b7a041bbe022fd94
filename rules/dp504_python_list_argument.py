"""
## What it does
Flags a call of an `nn.DataParallel` wrapper in a training script that passes a Python
list of per-sample values: `x.tolist()`, a list comprehension over the batch that does not
build tensors, `[len(s) for s in batch]`, `list(...)`, a list literal of numbers or
strings, directly or through a local name, or as an element of a list, tuple or dict
literal (`model([images.cuda(), lengths.tolist()])`).

## Why is this bad?
DataParallel's scatter walks lists, tuples and dicts and splits every tensor it finds in
them along dim 0; any other value (a number, a string, a list of numbers) is handed whole
to every replica. A list of B Python numbers is therefore paired, on each replica, with a
B/N chunk of the tensors: `pack_padded_sequence` raises `Expected len(lengths) to be equal
to batch_size`, or the replica silently uses the lengths or labels of other samples.

A container of tensors is not flagged: `model([images.cuda().float(), batch['annot']])`
reaches each replica as a list of the two tensors' chunks, which is what such a model
expects. Neither is a scalar or `None` inside a container (every replica gets the same
value, as intended), nor a comprehension that builds tensors. Whether each tensor's dim 0
is the batch cannot be seen statically: `dpcheck --confirm` checks that (DP803, DP805).

## How to fix
Pass per-sample values as a tensor with a batch dimension (`torch.tensor(lengths)`), so
that it is split together with the batch; convert it back inside forward if needed.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.bindings import reaching_assignment
from dpcheck.analysis.scripts import mentions_dataparallel, script_facts
from dpcheck.analysis.torch_api import _TENSOR_METHODS
from dpcheck.findings import Severity
from dpcheck.rule import Rule

# Builtins whose result is a Python scalar: a list of them is not split by scatter.
_SCALAR_BUILTINS = frozenset({"int", "float", "len", "str", "bool", "round", "abs", "ord", "repr"})
# Methods whose result is a Python scalar.
_SCALAR_METHODS = frozenset({"item", "size", "numel", "dim", "lower", "upper", "strip", "split", "format"})
# torch.* names that are not tensor-producing functions.
_NOT_TENSOR_PREFIXES = ("torch.cuda.", "torch.device", "torch.Size", "torch.nn.", "torch.utils.",
                        "torch.distributed.", "torch.backends.")


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
            lists = _ListFinder(call, ctx)
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                found = lists.find(arg)
                if found is None:
                    continue
                node, why = found
                where = "" if node is arg else " inside a container"
                yield self.violation(node, f"{why}{where} passed to the DataParallel model: scatter splits "
                                     "only the tensors in lists, tuples and dicts and hands other values whole "
                                     "to every replica, so each replica gets all B entries with its B/N chunk "
                                     "of the batch")


class _ListFinder:
    """Finds, in one argument of a wrapper call, a Python list of per-sample values."""

    def __init__(self, call, ctx):
        self.call, self.ctx = call, ctx

    def find(self, node, depth=0) -> tuple[ast.AST, str] | None:
        """(the node to report, why) for the argument itself or one of its container elements."""
        why = self._python_list(node, depth)
        if why:
            return node, why
        if isinstance(node, (ast.List, ast.Tuple)):
            elements = node.elts
        elif isinstance(node, ast.Dict):
            elements = node.values
        else:
            return None
        for element in elements:
            if isinstance(element, ast.Starred):
                continue
            found = self.find(element, depth)
            if found is not None:
                return found
        return None

    def _python_list(self, node, depth) -> str | None:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "tolist" \
                and not node.args:
            return f"`{ast.unparse(node)}` (a Python list)"
        if isinstance(node, ast.ListComp) and not self._tensor(node.elt):
            return "a list comprehension"
        if isinstance(node, ast.List) and node.elts and all(self._scalar(e) for e in node.elts):
            return "a list literal of Python values"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list":
            return "`list(...)`"
        if isinstance(node, ast.Name) and depth < 2:
            value = self._binding(node)
            if value is not None:
                found = self.find(value, depth + 1)
                if found is not None:
                    inner, why = found
                    if inner is value:
                        return f"`{node.id}`, {why},"
                    return f"`{node.id}`, which holds {why.rstrip(',')},"
        return None

    def _tensor(self, node) -> bool:
        """Is ``node`` visibly a tensor: a torch call, or a tensor method on anything?"""
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _TENSOR_METHODS:
                return True
            resolved = self.ctx.resolve(func) or ""
            return resolved.startswith("torch.") and not resolved.startswith(_NOT_TENSOR_PREFIXES)
        return False

    @staticmethod
    def _scalar(node) -> bool:
        """Is ``node`` visibly a Python number or string?"""
        if isinstance(node, ast.Constant):
            return node.value is not None
        if isinstance(node, ast.UnaryOp):
            return _ListFinder._scalar(node.operand)
        if isinstance(node, ast.JoinedStr):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                return func.id in _SCALAR_BUILTINS
            return isinstance(func, ast.Attribute) and func.attr in _SCALAR_METHODS
        return False

    def _binding(self, name):
        """The value of the assignment of ``name`` that reaches the call (in the call's own scope)."""
        binding = reaching_assignment(self.ctx, name.id, self.call)
        return binding.value if binding is not None else None
