"""``--fix``, ``--diff`` and friends: apply rules' fixes until the file is stable.

Per file: the offered fixes that the applicability allows are made concrete with
libcst (``dpcheck.fixes.cst``), the non-overlapping ones are applied together, the
result is checked again, and that repeats (at most ``MAX_PASSES`` times) until no
applicable fix is left, so a second run changes nothing. Nothing is written unless
the result parses; the writing itself keeps the file intact (``dpcheck.fixes.writer``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence

from dpcheck.analysis.notebook import is_notebook
from dpcheck.findings import Applicability, Finding
from dpcheck.fixes import cst as cstfix
from dpcheck.fixes import text as textedits
from dpcheck.fixes import writer
from dpcheck.record import field, record, replace

MAX_PASSES = 10


def applicable(finding: Finding, unsafe: bool) -> bool:
    if finding.fix is None:
        return False
    return finding.fix.applicability == Applicability.SAFE.value or (
        unsafe and finding.fix.applicability == Applicability.UNSAFE.value)


@record
class FixOutcome:
    findings: list[Finding] = field(default_factory=list)  # what is left to report, on the fixed text
    fixed: dict[str, list[Finding]] = field(default_factory=dict)  # per file: the fixes applied
    diffs: dict[str, str] = field(default_factory=dict)  # per file: a unified diff (for --diff)
    problems: dict[str, str] = field(default_factory=dict)  # per file: why it was not written

    @property
    def fixed_count(self) -> int:
        return sum(len(v) for v in self.fixed.values())


def withdraw_offers(group: Sequence[Finding]) -> list[Finding]:
    """``group`` with every offered fix that has no edits withdrawn (``fix=None``)."""
    return [replace(f, fix=None) if f.fix is not None and not f.fix.edits else f for f in group]


def materialise_file(filename: str, group: Sequence[Finding], rules: Mapping) -> list[Finding]:
    """One file's findings with their offered fixes turned into edits on the file as it
    is on disk (or withdrawn when the file cannot be read)."""
    if is_notebook(filename):
        from dpcheck.fixes import notebook as nbfix

        return nbfix.materialise(Path(filename), group, rules)
    try:
        source = writer.read(Path(filename)).text
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
        return withdraw_offers(group)
    return cstfix.materialise(source, group, rules)


def fix_files(findings: Sequence[Finding], rules: Mapping, unsafe: bool, write: bool,
              reanalyse: Callable[[str, str], list[Finding]]) -> FixOutcome:
    """Fix every file that has an applicable fix. ``reanalyse(filename, text)`` checks the
    new text of a file and returns its findings (settled and selected like the first run)."""
    outcome = FixOutcome()
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.filename, []).append(f)
    for filename, group in by_file.items():
        if filename == "-" or not any(applicable(f, unsafe) for f in group):
            outcome.findings.extend(group)
            continue
        fix_one = _fix_one
        if is_notebook(filename):
            from dpcheck.fixes.notebook import fix_notebook as fix_one
        outcome.findings.extend(fix_one(Path(filename), group, rules, unsafe, write, reanalyse, outcome))
    return outcome


def fix_text(text: str, name: str, group: list[Finding], rules, unsafe: bool,
             reanalyse: Callable[[str, str], list[Finding]]) -> tuple[str, list[Finding], list[Finding]]:
    """Apply the applicable fixes of one file's ``group`` to its ``text`` until it is stable:
    (the new text, its findings, the fixes applied). Every pass's result parses."""
    current, applied = group, []
    for _ in range(MAX_PASSES):
        candidates = cstfix.materialise(text, [f for f in current if applicable(f, unsafe)], rules)
        candidates = [f for f in candidates if f.fix is not None]
        if not candidates:
            break
        new_text, chosen = textedits.apply(text, [f.fix.edits for f in candidates])
        if new_text == text or not writer.parses(new_text):
            break
        applied.extend(candidates[i] for i in chosen)
        text = new_text
        current = reanalyse(name, text)
    return text, current, applied


def _fix_one(path: Path, group: list[Finding], rules, unsafe, write, reanalyse, outcome: FixOutcome) -> list[Finding]:
    name = str(path)
    try:
        snapshot = writer.read(path)
    except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as exc:
        outcome.problems[name] = f"cannot read the file: {getattr(exc, 'strerror', None) or exc}"
        return group
    text, current, applied = fix_text(snapshot.text, name, group, rules, unsafe, reanalyse)
    if text == snapshot.text:
        # No applicable fix could be made here (libcst cannot read the file, e.g. Python 3.6's
        # `async=True`, or no edit kept it parsing): left offered, the report would still say
        # "fixable with --fix" to a run that just asked for it.
        return [replace(f, fix=None) if f.fix is not None and applicable(f, unsafe) else f for f in group]
    if not write:  # --diff: show what would change, report the findings as they are
        outcome.diffs[name] = textedits.unified_diff(snapshot.text, text, name)
        outcome.fixed[name] = applied
        return group
    reason = writer.write_if_writable(snapshot, text)
    if reason is not None:
        outcome.problems[name] = reason
        return group
    outcome.fixed[name] = applied
    return current
