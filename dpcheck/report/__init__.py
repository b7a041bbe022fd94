"""Render a :class:`~dpcheck.findings.Report` in one of the output formats.

JSON uses ruff's field names (editor and CI integrations read them); SARIF is 2.1.0
as GitHub code scanning accepts it. Writers know only findings (``dpcheck.findings``).
"""

from __future__ import annotations

from typing import Callable, TextIO

from dpcheck.findings import Report
from dpcheck.report import structured, text

# One writer per output format (the names are dpcheck.constants.OUTPUT_FORMATS).
WRITERS: dict[str, Callable[[Report, TextIO], None]] = {
    "full": text.write_full,
    "concise": text.write_concise,
    "json": structured.write_json,
    "json-lines": structured.write_json_lines,
    "sarif": structured.write_sarif,
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
