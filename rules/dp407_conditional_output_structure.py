"""
## What it does
Flags keys added to a returned dict, or items appended to a returned list, under a
condition that depends on the data in forward: `if (labels > 0).any(): out["loss"] = ...`,
`if mask.sum() > 0: outputs.append(...)`.

## Why is this bad?
Gather merges the replicas' outputs position by position and key by key. When the
condition holds on one chunk and not another, the structures differ: `ValueError: All
dicts must have the same number of keys`, `KeyError`, or `zip() argument 2 is shorter
than argument 1`. It only happens for some batches, hours into training.

## How to fix
Always emit every key and item, with a zero tensor (or a per-sample mask) when the
condition does not hold.
"""

from __future__ import annotations

import ast

from dpcheck.analysis.dataflow import parameter_defaults
from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule

# Calls whose result depends on tensor values or on the chunk's size.
_DATA_CALLS = frozenset({"any", "all", "item", "sum", "numel", "nonzero", "max", "min", "size", "count_nonzero"})


class ConditionalOutputStructure(Rule):
    code = "DP407"
    name = "conditional-output-structure"
    severity = Severity.ERROR
    wrapper_method = "gather"
    forward_code_only = True
    confirms = frozenset({K.OUTPUT_STRUCTURE_DIFFERS, K.GATHER_FAILED})
    summary = "Output keys or items added under a data-dependent condition differ between replicas"
    fix_hint = "Always return every key/item, using zero tensors when the condition does not hold"
    bad_example = """
        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x, labels):
                logits = self.fc(x)
                out = {"logits": logits}
                if (labels > 0).any():
                    out["pos_loss"] = logits[labels > 0].sum(dim=-1)
                return out
    """
    good_example = """
        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x, labels=None):
                logits = self.fc(x)
                out = {"logits": logits}
                if labels is not None:
                    out["pos_loss"] = (logits.sum(dim=-1) * (labels > 0))
                return out
    """

    def check_class(self, model):
        fn = model.forward
        if fn is None:
            return
        returned = {v.id for v in fn.returns() if isinstance(v, ast.Name)}
        if not returned:
            return
        for node in fn.nodes(ast.Assign, ast.Call):
            container = None
            if isinstance(node, ast.Assign):
                target = node.targets[0]
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    container = target.value.id
            elif isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend", "insert") \
                    and isinstance(node.func.value, ast.Name):
                container = node.func.value.id
            if container not in returned or not _built_as_container(fn, container):
                continue  # a tensor written in place (`out[:, k:] = ...`) keeps its structure
            test = _data_dependent_guard(node, fn)
            if test is not None:
                yield self.violation(node, f"`{container}` gets this entry only when `{ast.unparse(test)}` "
                                     "holds: replicas whose chunk differs return a different structure and "
                                     "DataParallel's gather fails")


def _data_dependent_guard(node, fn):
    cur = fn.parent(node)
    while cur is not None and cur is not fn.node:
        if isinstance(cur, (ast.If, ast.While)):
            for sub in ast.walk(cur.test):
                if isinstance(sub, ast.Call) and (
                        (isinstance(sub.func, ast.Attribute) and sub.func.attr in _DATA_CALLS)
                        or (isinstance(sub.func, ast.Name) and sub.func.id == "len"
                            and not _same_on_every_replica(sub.args, fn))):
                    return cur.test
                if isinstance(sub, ast.Attribute) and sub.attr == "shape":
                    return cur.test
        cur = fn.parent(cur)
    return None


def _same_on_every_replica(args, fn) -> bool:
    """`len(layers)` of a forward parameter that defaults to a list, tuple or dict literal (scatter
    hands every replica a sequence of the same length: numbers whole, tensors a chunk each), or
    `len(self.blocks)`: the same value on every replica, unlike the length of a scattered tensor."""
    if len(args) != 1:
        return False
    arg = args[0]
    if fn.self_attr(arg) is not None:
        return True
    if not isinstance(arg, ast.Name) or arg.id in fn.local_values:
        return False
    return isinstance(parameter_defaults(fn.node.args).get(arg.id), (ast.List, ast.Tuple, ast.Dict))


def _built_as_container(fn, name) -> bool:
    """Was the returned name created as a dict or list in this function?"""
    for value in fn.local_values.get(name, ()):
        if isinstance(value, (ast.Dict, ast.List, ast.DictComp, ast.ListComp)):
            return True
        if isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] in (
                "dict", "list", "OrderedDict", "defaultdict"):
            return True
    return False
