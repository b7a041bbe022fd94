"""
## What it does
Reported by `--confirm` when forward receives a Python list, numpy array or other
object as long as the batch.

## Why is this bad?
Only tensors are split. Lists of lengths, labels or strings and numpy arrays are
passed by reference to every replica, which then pairs its chunk of the tensors with the
whole list: `lengths array has incorrect size`, or silently mis-paired labels.

## How to fix
Pass batch data as tensors with a batch dimension.

This is a dynamic rule: it has no static check and is reported only by
`dpcheck --confirm`, with the evidence of the run.
"""

from __future__ import annotations

from dpcheck.rules._argument_split import DIFFERENCES_A_BAD_SPLIT_EXPLAINS

from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class NonTensorArgumentNotSplit(Rule):
    code = "DP804"
    name = "non-tensor-argument-not-split"
    severity = Severity.ERROR
    reports = frozenset({K.ARGUMENT_NOT_SPLIT})
    supersedes = DIFFERENCES_A_BAD_SPLIT_EXPLAINS
    kind = "dynamic"
    summary = "A non-tensor batch argument (list, array, object) reaches every replica whole"
    fix_hint = "Pass batch data as tensors with a batch dimension"
