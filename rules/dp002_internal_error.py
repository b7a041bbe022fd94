"""
## Why is this bad?

A rule (or the engine) failed on this file: this is a bug in dpcheck, not in your
code. The finding names the rule and where it failed. The other rules and files are
still checked and reported, and the run exits with code 2 so that CI notices.

## How to fix

Please report it with the file (or a reduced version of it). Until it is fixed,
`--ignore` the failing rule for that file with `per-file-ignores`.
"""

from __future__ import annotations

from dpcheck.rule import Rule, Severity


class InternalErrorRule(Rule):
    code = "DP002"
    name = "internal-error"
    severity = Severity.ERROR
    summary = "A rule failed on this file (a dpcheck bug)"
    fix_hint = "Please report it with the file; the other rules and files were still checked"
    kind = "engine"  # reported by the engine itself, never by a check
