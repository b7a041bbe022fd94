"""Render a :class:`~dpcheck.findings.Report` in one of the output formats.

JSON uses ruff's field names (editor and CI integrations read them); SARIF is 2.1.0
as GitHub code scanning accepts it. Writers know only findings (``dpcheck.findings``).
"""

from __future__ import annotations

import io
from typing import Callable, TextIO

from dpcheck.findings import Report
from dpcheck.record import replace
from dpcheck.report import text


def _structured(name: str) -> Callable[[Report, TextIO], None]:
    """A writer of dpcheck.report.structured, imported on first use (it needs json and
    hashlib, which the text formats, the pre-commit and editor case, never do)."""
    def write(report: Report, out: TextIO) -> None:
        from dpcheck.report import structured

        getattr(structured, name)(report, out)
    return write


# One writer per output format (the names are dpcheck.constants.OUTPUT_FORMATS).
WRITERS: dict[str, Callable[[Report, TextIO], None]] = {
    "full": text.write_full,
    "concise": text.write_concise,
    "json": _structured("write_json"),
    "json-lines": _structured("write_json_lines"),
    "sarif": _structured("write_sarif"),
    "github": text.write_github,
}
# Formats read by people may be coloured and get a summary line after the findings.
COLOURED: dict[str, Callable[[Report, TextIO, bool], None]] = {"full": text.write_full,
                                                               "concise": text.write_concise}
SUMMARISED = frozenset({"full", "concise"})


def write(report: Report, output_format: str, out: TextIO, statistics: bool = False, quiet: bool = False,
          colour: bool = False) -> None:
    """``colour``: ANSI colour for the formats people read (the caller decides when)."""
    if statistics:
        text.write_statistics(report, out, as_json=output_format in ("json", "json-lines"))
        return
    if output_format in COLOURED:
        COLOURED[output_format](report, out, colour)
    else:
        WRITERS[output_format](report, out)
    if output_format in SUMMARISED and not quiet:
        text.write_summary(report, out, colour)


def render(report: Report, output_format: str, statistics: bool = False, quiet: bool = False,
           colour: bool = False, failures: list[str] | None = None) -> str:
    """The whole document as one string, so what is printed is always complete (valid JSON
    or SARIF). A finding the writer fails on is left out and named in ``failures``."""
    try:
        return _render(report, output_format, statistics, quiet, colour)
    except Exception:  # noqa: BLE001 - find the findings that break the writer, keep the rest
        kept = []
        for finding in report.findings:
            try:
                _render(replace(report, findings=[finding]), output_format, statistics, quiet, colour)
                kept.append(finding)
            except Exception as exc:  # noqa: BLE001
                if failures is not None:
                    failures.append(f"cannot write {finding.code} at {finding.filename!r}:{finding.row} as "
                                    f"{output_format}: {type(exc).__name__}: {exc}")
        return _render(replace(report, findings=kept), output_format, statistics, quiet, colour)


def _render(report: Report, output_format: str, statistics: bool, quiet: bool, colour: bool) -> str:
    buffer = io.StringIO()
    write(report, output_format, buffer, statistics, quiet, colour)
    return buffer.getvalue()
