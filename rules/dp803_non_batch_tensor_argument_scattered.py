"""
## What it does
Reported by `--confirm` when forward receives a tensor whose first dimension is not
the batch size (a mask, a codebook, a hidden state, a 0-dim scalar).

## Why is this bad?
DataParallel chunks every tensor argument along dim 0. A `(T, T)` mask gets cut into
pieces, indices become chunk-local, and when dim 0 is smaller than the number of GPUs
the zip of arguments truncates: whole replicas, with their share of the batch, silently
disappear. A 0-dim tensor fails with `chunk expects at least a 1-dimensional tensor`.

## How to fix
Register constant tensors as buffers, or expand them to the batch size.

This is a dynamic rule: it has no static check and is reported only by
`dpcheck --confirm`, with the evidence of the run.
"""

from __future__ import annotations

from dpcheck.rules._argument_split import DIFFERENCES_A_BAD_SPLIT_EXPLAINS

from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class NonBatchTensorArgumentScattered(Rule):
    code = "DP803"
    name = "non-batch-tensor-argument-scattered"
    severity = Severity.ERROR
    reports = frozenset({K.ARGUMENT_NOT_BATCH_SPLIT, K.ARGUMENT_ZERO_DIM})
    supersedes = DIFFERENCES_A_BAD_SPLIT_EXPLAINS
    kind = "dynamic"
    summary = "A tensor argument whose dim 0 is not the batch is split across replicas anyway"
    fix_hint = "Register constant tensors as buffers, or expand them to the batch size"
