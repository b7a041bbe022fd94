"""
## What it does
Reported by `--confirm` when running the model under DataParallel gives a different
output, gradient or module state than the same model on one device with the same
inputs, or raises where the single-device run did not, and no static finding explains
the difference.

## Why is this bad?
The harness runs both in `eval()` mode from the same seed, so any difference beyond
floating-point tolerance is DataParallel's doing: a computation across the batch, state
written on a replica, a device pinned somewhere the static checks could not see.

## How to fix
Compare the evidence with the static findings' fixes; return values instead of storing them.

This is a dynamic rule: it has no static check and is reported only by
`dpcheck --confirm`, with the evidence of the run.
"""

from __future__ import annotations

from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class OutputDiffersFromSingleDevice(Rule):
    code = "DP801"
    name = "output-differs-from-single-device"
    severity = Severity.ERROR
    reports = frozenset({
        K.EXCEPTION_AT_LINE, K.DEVICE_MISMATCH, K.VALUES_DIFFER, K.INTEGER_VALUES_DIFFER, K.GRADS_DIFFER,
        K.STATE_LOST_ON_REPLICA, K.STATE_MUTATED_PER_REPLICA, K.STATE_DIFFERS, K.SUBMODULES_NOT_KEPT})
    kind = "dynamic"
    summary = "The DataParallel run differs from the single-device run (values, state or an error)"
    fix_hint = "Compare the evidence with the static findings' fixes; return values instead of storing them"

    def reports_observation(self, observation):
        return super().reports_observation(observation) and "first_batch_ran" not in observation.details
