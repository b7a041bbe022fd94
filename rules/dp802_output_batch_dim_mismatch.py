"""
## What it does
Reported by `--confirm` when the output DataParallel gathers has a different shape
or structure than the single-device output, or gather itself fails.

## Why is this bad?
Gather concatenates every tensor along dim 0 and merges containers position by
position; outputs whose dim 0 is not the batch, whose size depends on the data, or
whose structure depends on the chunk come back wrong or make gather raise.

## How to fix
Return batch-first tensors with the same structure on every replica.

This is a dynamic rule: it has no static check and is reported only by
`dpcheck --confirm`, with the evidence of the run.
"""

from __future__ import annotations

from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class OutputBatchDimMismatch(Rule):
    code = "DP802"
    name = "output-batch-dim-mismatch"
    severity = Severity.ERROR
    reports = frozenset({
        K.GATHER_FAILED, K.OUTPUT_STRUCTURE_DIFFERS, K.SCALAR_OUTPUT_GATHERED, K.SCALAR_OUTPUT_SHAPE_DIFFERS,
        K.OUTPUT_SHAPE_DIFFERS, K.OUTPUT_VALUE_DIFFERS, K.LOSS_MEAN_WEIGHTS_CHUNKS_EQUALLY})
    kind = "dynamic"
    summary = "The gathered output's shape or structure differs from the single-device output"
    fix_hint = "Return batch-first tensors with the same structure on every replica"
