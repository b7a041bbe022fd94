"""Formats for people and CI logs: full (with source and carets), concise, github, the summary."""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import TextIO

from dpcheck.findings import Finding, Report, Severity

TAB_SIZE = 4


def _char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_line(text: str) -> tuple[str, list[int]]:
    """``text`` as a terminal shows it, and the display column where each character starts
    (one entry per character, plus one for the end), so carets can be placed under it.

    Tabs go to the next multiple of TAB_SIZE; control characters and line/paragraph
    separators (a form feed, U+2028 inside a string) become one space, so that the snippet
    stays on one line and the columns stay countable; wide characters take two columns.
    """
    if text.isascii() and text.isprintable():
        return text, list(range(len(text) + 1))
    shown, starts, column = [], [], 0
    for char in text:
        starts.append(column)
        if char == "\t":
            width = TAB_SIZE - column % TAB_SIZE
            shown.append(" " * width)
        elif not char.isprintable() and char != " ":
            width = 1
            shown.append(" ")
        else:
            width = _char_width(char)
            shown.append(char)
        column += width
    starts.append(column)
    return "".join(shown), starts


def location(f: Finding) -> str:
    """``path:row:col`` for a file, ``path:cell N:row:col`` for a notebook cell (ruff's form)."""
    cell = f"cell {f.cell}:" if f.cell is not None else ""
    return f"{f.filename}:{cell}{f.row}:{f.col}"


class Paint:
    """ANSI styles as ruff uses them (path bold, code bold red, separators cyan); plain
    text when off."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def _style(self, text: str, codes: str) -> str:
        return f"\x1b[{codes}m{text}\x1b[0m" if self.on else text

    def bold(self, text: str) -> str:
        return self._style(text, "1")

    def code(self, text: str) -> str:
        return self._style(text, "1;31")

    def sep(self, text: str) -> str:
        return self._style(text, "36")

    def blue(self, text: str) -> str:
        return self._style(text, "1;34")

    def green(self, text: str) -> str:
        return self._style(text, "1;32")


def _head(f: Finding, paint: Paint, marker: str = "") -> str:
    """`location: CODE [severity] message`, the first line of full and concise (``location``,
    painted when colour is on)."""
    colon = paint.sep(":")
    cell = f"cell {f.cell}{colon}" if f.cell is not None else ""
    return (f"{paint.bold(f.filename)}{colon}{cell}{f.row}{colon}{f.col}{colon} {paint.code(f.code)}{marker} "
            f"[{f.severity}] {f.message}")


def write_full(report: Report, out: TextIO, colour: bool = False) -> None:
    paint = Paint(colour)
    for f in report.findings:
        out.write(_head(f, paint, _marker(report, f)) + "\n")
        if not f.line_text:
            continue
        gutter = len(str(f.row))
        pad = " " * gutter
        line, starts = display_line(f.line_text)
        last = len(starts) - 1
        start = starts[min(max(f.col - 1, 0), last)]
        end = starts[min(max(f.end_col - 1, 0), last)] if f.end_row == f.row else len(line)
        width = max(1, end - start)
        bar = paint.blue("|")
        out.write(f"{pad} {bar}\n{paint.blue(str(f.row))} {bar} {line}\n"
                  f"{pad} {bar} {' ' * start}{paint.code('^' * width + ' ' + f.code)}\n{pad} {bar}\n")
        hint = report.rule(f.code).help
        if hint:
            out.write(f"{pad} = help: {hint}\n")
        if f.fix is not None:
            out.write(f"{pad} = fix ({f.fix.applicability}): {f.fix.message}\n")
        if f.confirmation is not None:
            c = f.confirmation
            modes = f" [ran in {' and '.join(c.modes)} mode]" if c.modes else ""
            out.write(f"{pad} = {c.status} ({c.backend}): {c.evidence}{modes}\n")
        out.write("\n")


def write_concise(report: Report, out: TextIO, colour: bool = False) -> None:
    paint = Paint(colour)
    for f in report.findings:
        status = f" [{f.confirmation.status}]" if f.confirmation is not None else ""
        out.write(f"{_head(f, paint, _marker(report, f))}{status}\n")


def _marker(report: Report, finding) -> str:
    """` [*]` after the code of a finding that `--fix` would fix, as ruff marks them."""
    return " [*]" if report.fixable(finding) else ""


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write_github(report: Report, out: TextIO) -> None:
    command = {"error": "error", "warning": "warning", "info": "notice"}
    for f in report.findings:
        # Rows of a notebook cell are no rows of the .ipynb file: like ruff, annotate the
        # file's first line and name the cell in the message.
        row, col, end_row, end_col = (f.row, f.col, f.end_row, f.end_col) if f.cell is None else (1, 1, 1, 1)
        where = f"{location(f)}: " if f.cell is not None else ""
        props = (f"file={_escape_property(f.filename)},line={row},col={col},"
                 f"endLine={end_row},endColumn={end_col},title={f.code}")
        out.write(f"::{command.get(f.severity, 'error')} {props}::"
                  f"{_escape_data(f'{where}{f.code} {f.message}')}\n")


def write_summary(report: Report, out: TextIO, colour: bool = False) -> None:
    findings = report.findings
    if not findings:
        out.write(Paint(colour).green("All checks passed!") + "\n")
        return
    counts = Counter(f.severity for f in findings)
    parts = [f"{counts[s]} {s}{'s' if counts[s] != 1 else ''}" for s in ("error", "warning", "info")
             if counts[s]]
    level = report.fail_level
    failing = sum(1 for f in findings if Severity(f.severity).rank >= level.rank)
    if failing == 0:
        verdict = f"none at or above --fail-level={level.value}, so the run passes"
    else:
        verdict = f"{failing} at or above --fail-level={level.value} {'fails' if failing == 1 else 'fail'} the run"
    out.write(f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} ({', '.join(parts)}); {verdict}.\n")
    now, hidden = report.fix_counts
    if now:
        option = "`--fix --unsafe-fixes`" if report.unsafe_fixes else "the `--fix` option"
        extra = f" ({hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the " \
                "`--unsafe-fixes` option)" if hidden else ""
        out.write(f"[*] {now} fixable with {option}{extra}.\n")
    elif hidden:
        out.write(f"No fixes available ({hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with "
                  "the `--unsafe-fixes` option).\n")


def write_statistics(report: Report, out: TextIO, as_json: bool = False) -> None:
    import json

    counts = Counter(f.code for f in report.findings)
    rows = [(code, counts[code], report.rule(code).name) for code in sorted(counts, key=lambda c: (-counts[c], c))]
    if as_json:
        json.dump([{"code": c, "name": n, "count": k} for c, k, n in rows], out, indent=2)
        out.write("\n")
        return
    width = max((len(str(k)) for _, k, _ in rows), default=1)
    for code, count, name in rows:
        out.write(f"{count:>{width}}\t{code}\t{name}\n")
