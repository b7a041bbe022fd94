"""
## What it does
Reported by `--confirm` when forward receives a list or tuple of tensors.

## Why is this bad?
A list is a container to scatter: each tensor inside is chunked along its own dim 0,
so every replica gets every sample, each cut in pieces, instead of a share of the list.

## How to fix
Pad to one tensor plus lengths, or override DataParallel.scatter.

This is a dynamic rule: it has no static check and is reported only by
`dpcheck --confirm`, with the evidence of the run.
"""

from __future__ import annotations

from dpcheck.rules._argument_split import DIFFERENCES_A_BAD_SPLIT_EXPLAINS

from dpcheck.findings import ObservationKind as K
from dpcheck.findings import Severity
from dpcheck.rule import Rule


class ListArgumentSplitPerElement(Rule):
    code = "DP805"
    name = "list-argument-split-per-element"
    severity = Severity.ERROR
    reports = frozenset({K.ARGUMENT_LIST_SPLIT_PER_ELEMENT, K.ARGUMENT_PACKED_SEQUENCE_SPLIT})
    supersedes = DIFFERENCES_A_BAD_SPLIT_EXPLAINS
    kind = "dynamic"
    summary = "A list of tensors is split element by element, not as a list"
    fix_hint = "Pad to one tensor plus lengths, or override DataParallel.scatter"
