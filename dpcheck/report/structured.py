"""Formats for tools: json and json-lines (ruff's field names), SARIF 2.1.0."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import TextIO

from dpcheck import __version__
from dpcheck.findings import Finding, Report


def _location(row: int, column: int) -> dict:
    return {"row": row, "column": column}


def finding_json(f: Finding, report: Report) -> dict:
    return {
        "cell": f.cell,
        "code": f.code,
        "name": report.rule(f.code).name,
        "message": f.message,
        "severity": f.severity,
        "filename": os.path.abspath(f.filename) if f.filename != "-" else f.filename,
        "location": _location(f.row, f.col),
        "end_location": _location(f.end_row, f.end_col),
        "fix": None if f.fix is None else {k: v for k, v in f.fix.to_dict().items() if k != "data"},
        "url": report.rule(f.code).url,
        "noqa_row": f.noqa_row,
        "confirmation": None if f.confirmation is None else f.confirmation.to_dict(),
    }


def write_json(report: Report, out: TextIO) -> None:
    json.dump([finding_json(f, report) for f in report.findings], out, indent=2)
    out.write("\n")


def write_json_lines(report: Report, out: TextIO) -> None:
    for f in report.findings:
        out.write(json.dumps(finding_json(f, report)) + "\n")


def _relative_uri(filename: str, root: Path) -> str:
    path = Path(filename)
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _sarif_fix(fix, uri: str) -> dict:
    """SARIF's fix object: one artifact change of replacements (1-based columns)."""
    return {"description": {"text": f"{fix.message} ({fix.applicability})"},
            "artifactChanges": [{"artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"}, "replacements": [
                {"deletedRegion": {"startLine": e.row, "startColumn": e.col + 1, "endLine": e.end_row,
                                   "endColumn": e.end_col + 1},
                 "insertedContent": {"text": e.content}} for e in fix.edits]}]}


def _sarif_properties(f: Finding) -> dict:
    """Extra facts on a SARIF result: the confirmation, and for a notebook the cell its
    region's rows count in (SARIF has no notion of cells)."""
    properties: dict = {}
    if f.confirmation is not None:
        properties["confirmation"] = f.confirmation.to_dict()
    if f.cell is not None:
        properties["cell"] = f.cell
    return {"properties": properties} if properties else {}


def sarif_log(report: Report) -> dict:
    codes = list(dict.fromkeys([*report.selected, *(f.code for f in report.findings)]))
    rules_json, index = [], {}
    for code in codes:
        rule = report.rule(code)
        full = rule.explanation or rule.summary
        index[code] = len(rules_json)
        rules_json.append({
            "id": code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": full},
            "help": {"text": f"{rule.help}\n\n{full}", "markdown": rule.markdown or rule.summary},
            "helpUri": rule.url,
            "defaultConfiguration": {"level": {"info": "note"}.get(rule.severity, rule.severity)},
            "properties": {"tags": ["dataparallel", "pytorch"]},
        })
    results = []
    occurrences: Counter = Counter()
    for f in report.findings:
        uri = _relative_uri(f.filename, report.root)
        basis = f"{f.code}|{uri}|{f.line_text.strip()}"
        occurrences[basis] += 1
        fingerprint = hashlib.sha256(f"{basis}|{occurrences[basis]}".encode()).hexdigest()[:32]
        results.append({
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": {"info": "note"}.get(f.severity, f.severity),
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": f.row, "startColumn": f.col,
                           "endLine": f.end_row, "endColumn": f.end_col},
            }}],
            "partialFingerprints": {"dpcheck/v1": fingerprint},
            **({"fixes": [_sarif_fix(f.fix, uri)]} if f.fix is not None and f.fix.edits else {}),
            **_sarif_properties(f),
        })
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "dpcheck", "version": __version__, "semanticVersion": __version__,
                                "informationUri": "https://github.com/dpcheck/dpcheck",
                                "rules": rules_json}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": report.root.resolve().as_uri() + "/"}},
            "results": results,
        }],
    }


def write_sarif(report: Report, out: TextIO) -> None:
    json.dump(sarif_log(report), out, indent=2)
    out.write("\n")
