"""
## Why is this bad?

`--confirm` could not compare this file's model on one device and under DataParallel:
the model file raised on import, its `dpcheck_example` or constructor failed, no input
could be synthesized, the single-device (reference) run itself failed at every batch
size, or the child process timed out or crashed. The reason is in the finding's
confirmation (`not-run`).

Without this finding such a file would be reported as clean, although nothing about it
was checked at run time. It is reported only under `--confirm`, once per
file, at line 1, and makes the run exit 1 like any finding (unless `--exit-zero`).
Files with nothing to run (no `nn.Module` subclass and no `dpcheck_example`) do not get
it: there is nothing to confirm.

## How to fix

Give the harness inputs it can run: a `dpcheck_example(batch_size)` function in the
model file, or an `examples` file in the configuration (see the README's `--confirm`
section); raise `--timeout` for a slow model. To accept files that cannot be run,
`--ignore DP003` (or `per-file-ignores`).
"""

from __future__ import annotations

from dpcheck.rule import Rule, Severity


class ConfirmationNotRun(Rule):
    code = "DP003"
    name = "confirmation-not-run"
    severity = Severity.WARNING
    summary = "--confirm could not run or compare this file's model; nothing about it was confirmed"
    fix_hint = "Add a dpcheck_example(batch_size) to the file, or an examples file; see the reason given"
    kind = "engine"  # reported by --confirm itself, never by a check
