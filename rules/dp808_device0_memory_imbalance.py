"""
## What it does
Reported by `--confirm` on real GPUs when the peak memory of device 0 is much higher
than that of the other devices.

## Why is this bad?
The original parameters, gradients, optimizer state, the gathered outputs and the loss
all live on `device_ids[0]`; the other GPUs only hold transient replicas. Device 0 runs
out of memory first while the others idle.

## How to fix
Compute the loss inside forward so only scalars are gathered, or use DistributedDataParallel.

This is a dynamic rule: it has no static check and is reported only by
`dpcheck --confirm`, with the evidence of the run.
"""

from __future__ import annotations

from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class Device0MemoryImbalance(Rule):
    code = "DP808"
    name = "device0-memory-imbalance"
    severity = Severity.WARNING
    reports = frozenset({K.MEMORY_IMBALANCE})
    kind = "dynamic"
    summary = "Device 0 peaks far above the other GPUs under DataParallel"
    fix_hint = "Compute the loss inside forward so only scalars are gathered, or use DistributedDataParallel"
