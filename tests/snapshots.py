"""Snapshots of the fixture findings, in the spirit of ruff's insta snapshots.

One snapshot file per fixtures folder (``fixtures/dp101/snapshot.snap``), so a rule's branch
only ever touches its own snapshot. A rule's snapshot pins every finding *of that rule*
over the files of its folder (flagged and safe); the engine folders (``engine``,
``crossfile``) pin the codes their files name in ``# expect:`` / ``# noqa:`` comments, with
the whole folder analysed together as the engine does (cross-file classes settle).

Each finding is written like ruff's ``full`` output: location and span, code, severity,
message, the source lines with a caret line, and the fix (applicability, message, each
edit, and the diff the fix makes). Findings silenced by ``# noqa`` are kept, marked
``suppressed``: the engine keeps them for ``--confirm``.

Update with ``python -m pytest tests/test_fixtures.py --snapshot-update``.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Iterable, Sequence

from dpcheck import engine
from dpcheck.findings import Finding
from dpcheck.fixes import cst as cstfix
from dpcheck.fixes import text as textedits
from dpcheck.registry import rules_by_code

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SNAPSHOT_NAME = "snapshot.snap"  # not .py: discovery never treats it as source
UPDATE_COMMAND = "python -m pytest tests/test_fixtures.py --snapshot-update"
ENGINE_FOLDERS = ("engine", "crossfile", "opaque_wrap", "unnamed_class", "unnamed_class_by_name",
                  "unnamed_class_by_namespace", "unnamed_class_by_star_namespace", "unnamed_class_twin",
                  "bare_called_loss", "bare_called_loss_handed_on", "application", "latent_wrap",
                  "latent_wrap_live")

_NAMED_CODES = re.compile(r"#\s*(?:expect|noqa)\s*:\s*(?P<codes>DP\d{3}(?:\s*,\s*DP\d{3})*)")
_MAX_SOURCE_LINES = 6


def snapshot_path(folder: Path) -> Path:
    return folder / SNAPSHOT_NAME


def fixture_files(folder: Path) -> list[Path]:
    # `*.fixed.py` are the expected results of --fix (tests/test_fix_fixtures.py), not inputs.
    return sorted(p for p in folder.rglob("*.py") if not p.name.endswith(".fixed.py"))


def codes_named_in(folder: Path) -> list[str]:
    """Codes a folder's files name in `# expect:` or `# noqa:` comments (the engine folders)."""
    codes: set[str] = set()
    for path in fixture_files(folder):
        for match in _NAMED_CODES.finditer(path.read_text(encoding="utf-8")):
            codes |= set(re.split(r"\s*,\s*", match.group("codes")))
    return sorted(codes)


def analyse(folder: Path, codes: Sequence[str]) -> tuple[list[Path], list[Finding]]:
    """Every file of ``folder`` analysed together (one run, cross-file settling included),
    only ``codes`` selected; returns the files and their findings, reported and suppressed."""
    files = fixture_files(folder)
    results, _ = engine.analyze_files(files, list(codes), jobs=1)
    run = engine.settle(results)
    findings = _materialise([f for f in run.findings + run.suppressed if f.code in codes], codes)
    findings.sort(key=lambda f: (_relative(f.filename), f.row, f.col, f.end_row, f.end_col, f.code, f.message))
    return files, findings


def _materialise(findings: list[Finding], codes: Sequence[str]) -> list[Finding]:
    """Offered fixes made concrete (edits), as the JSON output shows them."""
    table = rules_by_code()
    rules = {code: table[code]() for code in codes if code in table}
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.filename, []).append(f)
    out: list[Finding] = []
    for filename, group in by_file.items():
        out.extend(cstfix.materialise(Path(filename).read_text(encoding="utf-8"), group, rules))
    return out


def _relative(filename: str) -> str:
    path = Path(filename)
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def render(title: str, files: Sequence[Path], findings: Sequence[Finding]) -> str:
    """The snapshot text: a header, then per file its findings (or that it has none)."""
    out = [
        f"# {title}",
        f"# Update: {UPDATE_COMMAND}",
        "# Spans are row:col-end_row:end_col, rows and columns 1-based (ruff's JSON).",
        "",
    ]
    by_file: dict[str, list[Finding]] = {}
    for finding in findings:
        by_file.setdefault(_relative(finding.filename), []).append(finding)
    for path in files:
        name = _relative(str(path))
        group = by_file.pop(name, [])
        text = path.read_text(encoding="utf-8")
        out.append(f"## {name}: {len(group)} finding{'s' if len(group) != 1 else ''}")
        out.append("")
        for finding in group:
            out.extend(_render_finding(name, text, finding))
            out.append("")
    for name, group in sorted(by_file.items()):  # findings in files the folder does not list
        out.append(f"## {name} (outside the folder): {len(group)} findings")
        out.append("")
        for finding in group:
            out.extend(_render_finding(name, "", finding))
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _render_finding(name: str, text: str, f: Finding) -> Iterable[str]:
    suppressed = " (suppressed by noqa)" if f.suppressed else ""
    yield f"{name}:{f.row}:{f.col}-{f.end_row}:{f.end_col}: {f.code} [{f.severity}]{suppressed} {f.message}"
    lines = text.splitlines()
    rows = list(range(f.row, f.end_row + 1))
    width = len(str(f.end_row))
    shown = rows if len(rows) <= _MAX_SOURCE_LINES else rows[:_MAX_SOURCE_LINES - 1] + [f.end_row]
    yield f"{' ' * width} |"
    previous = None
    for row in shown:
        if previous is not None and row != previous + 1:
            yield f"{'.' * width} |"
        line = lines[row - 1] if 0 < row <= len(lines) else ""
        yield f"{row:>{width}} | {line}".rstrip()
        if row == f.row:
            start = f.col - 1
            stop = f.end_col - 1 if f.end_row == f.row else len(line)
            yield f"{' ' * width} | {' ' * start}{'^' * max(1, stop - start)}"
        previous = row
    yield f"{' ' * width} |"
    if f.fix is None:
        yield "  fix: none"
        return
    yield f"  fix ({f.fix.applicability}): {f.fix.message}"
    for e in f.fix.edits:
        yield f"    edit {e.row}:{e.col + 1}-{e.end_row}:{e.end_col + 1} -> {e.content!r}"
    if text:
        fixed, applied = textedits.apply(text, [f.fix.edits])
        diff = difflib.unified_diff(text.splitlines(), fixed.splitlines(), "before", "after", n=1, lineterm="")
        body = list(diff)[2:]  # the ---/+++ header says nothing here
        if not applied or not body:
            yield "    diff: (no change)"
        else:
            yield "    diff:"
            for line in body:
                yield f"    {line}".rstrip()


def analyse_samples(folder: Path, codes: Sequence[str]) -> tuple[list[Path], list[Finding]]:
    """A rule folder's samples, each analysed as its own project: a top-level file alone, a
    subfolder (a package of files that import each other) as one run. The samples are
    unrelated, and a project-wide fact (which classes the project's scripts wrap) must not
    leak from one into another."""
    samples: dict[Path, list[Path]] = {}
    for path in fixture_files(folder):
        top = folder / path.relative_to(folder).parts[0]
        samples.setdefault(top, []).append(path)
    files: list[Path] = []
    findings: list[Finding] = []
    for group in samples.values():
        results, _ = engine.analyze_files(group, list(codes), jobs=1)
        run = engine.settle(results)
        files += group
        findings += [f for f in run.findings + run.suppressed if f.code in codes]
    findings = _materialise(findings, codes)
    findings.sort(key=lambda f: (_relative(f.filename), f.row, f.col, f.end_row, f.end_col, f.code, f.message))
    return sorted(files), findings


def rule_snapshot(code: str) -> tuple[Path, str, list[Path], list[Finding]]:
    folder = FIXTURES / code.lower()
    files, findings = analyse_samples(folder, [code])
    title = f"{code}: findings of {code} over fixtures/{folder.name}"
    return snapshot_path(folder), render(title, files, findings), files, findings


def engine_snapshot(name: str) -> tuple[Path, str, list[Path], list[Finding]]:
    folder = FIXTURES / name
    codes = codes_named_in(folder)
    files, findings = analyse(folder, codes)
    title = f"fixtures/{name}, analysed together; codes its files name: {', '.join(codes)}"
    return snapshot_path(folder), render(title, files, findings), files, findings
