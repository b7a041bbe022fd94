"""
## What it does
Reported by `--confirm` when the DataParallel run matches at a batch size divisible
by the number of devices but fails or differs at one that leaves an uneven last chunk
or is smaller than the device count.

## Why is this bad?
Chunks are `ceil(B/N)` samples; the last one is smaller and some replicas may get one
sample or none. `squeeze()` then drops the batch dim, BatchNorm fails on one value per
channel, and mean losses weight uneven chunks equally. It shows up on the last batch of
an epoch, or in evaluation.

## How to fix
Avoid squeeze() without dim and batch-size assumptions; use drop_last=True for training.

This is a dynamic rule: it has no static check and is reported only by
`dpcheck --confirm`, with the evidence of the run.
"""

from __future__ import annotations

from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class FailsAtSmallOrUnevenBatch(Rule):
    code = "DP807"
    name = "fails-at-small-or-uneven-batch"
    severity = Severity.ERROR
    reports = frozenset({K.EXCEPTION_AT_LINE, K.DEVICE_MISMATCH, K.KEYWORD_CHUNK_MISMATCH})
    kind = "dynamic"
    summary = "The model works at a batch divisible by the GPU count but not at an uneven or smaller one"
    fix_hint = "Avoid squeeze() without dim and batch-size assumptions; use drop_last=True for training"

    def reports_observation(self, observation):
        # Raised at a batch size other than the first, which ran.
        return super().reports_observation(observation) and "first_batch_ran" in observation.details
