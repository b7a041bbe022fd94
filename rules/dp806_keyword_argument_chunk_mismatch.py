"""
## What it does
Reported by `--confirm` when keyword arguments end up with a different number of
chunks than the positional arguments.

## Why is this bad?
Positional and keyword arguments are scattered separately. With fewer keyword chunks,
later replicas get `{}` and silently use the defaults, or parallel_apply fails with
`The number of modules 2 is not equal to the number of kwargs_tup 1`.

## How to fix
Give every tensor argument the same batch dimension (and drop_last=True).

This is a dynamic rule: it has no static check and is reported only by
`dpcheck --confirm`, with the evidence of the run.
"""

from __future__ import annotations

from dpcheck.rules._argument_split import DIFFERENCES_A_BAD_SPLIT_EXPLAINS

from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class KeywordArgumentChunkMismatch(Rule):
    code = "DP806"
    name = "keyword-argument-chunk-mismatch"
    severity = Severity.ERROR
    reports = frozenset({K.KEYWORD_CHUNK_MISMATCH})
    supersedes = DIFFERENCES_A_BAD_SPLIT_EXPLAINS
    kind = "dynamic"
    summary = "Keyword arguments scatter into fewer chunks than positional ones"
    fix_hint = "Give every tensor argument the same batch dimension (and drop_last=True)"

    def reports_observation(self, observation):
        return super().reports_observation(observation) and "first_batch_ran" not in observation.details
