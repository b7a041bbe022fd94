"""Render findings: full, concise, json, json-lines, sarif, github.

JSON uses ruff's field names (editor and CI integrations read them); SARIF is 2.1.0
as GitHub code scanning accepts it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence, TextIO

from dpcheck import __version__
from dpcheck.analyze import INTERNAL_ERROR, SYNTAX_ERROR, Finding
from dpcheck.registry import rules_by_code
from dpcheck.rule import ENGINE_DOCS_URL, Fix

_ENGINE_CODES = {
    SYNTAX_ERROR: ("syntax-error", "The file cannot be parsed (syntax error or undecodable bytes)",
                   "Fix the syntax error; dpcheck checks nothing else in this file until then"),
    INTERNAL_ERROR: ("internal-error", "A rule failed on this file (a dpcheck bug)",
                     "Please report it with the file; the other rules and files were still checked"),
}


def rule_meta(code: str) -> tuple[str, str, str, str]:
    """(name, summary, help, default level) for rule codes and engine codes."""
    rule = rules_by_code().get(code)
    if rule is not None:
        return rule.name, rule.summary, rule.fix_hint, rule.severity.value
    name, summary, hint = _ENGINE_CODES.get(code, (code.lower(), code, ""))
    return name, summary, hint, "error"


def rule_url(code: str) -> str:
    rule = rules_by_code().get(code)
    return rule.url() if rule is not None else ENGINE_DOCS_URL


def _location(row: int, column: int) -> dict:
    return {"row": row, "column": column}


def _fix_json(fix: Fix | None) -> dict | None:
    if fix is None:
        return None
    return {"applicability": fix.applicability, "message": fix.message,
            "edits": [{"content": e.content, "location": _location(e.row, e.col + 1),
                       "end_location": _location(e.end_row, e.end_col + 1)} for e in fix.edits]}


def finding_json(f: Finding) -> dict:
    name, *_ = rule_meta(f.code)
    return {
        "cell": None,
        "code": f.code,
        "name": name,
        "message": f.message,
        "severity": f.severity,
        "filename": os.path.abspath(f.filename) if f.filename != "-" else f.filename,
        "location": _location(f.row, f.col),
        "end_location": _location(f.end_row, f.end_col),
        "fix": _fix_json(f.fix),
        "url": rule_url(f.code),
        "noqa_row": f.noqa_row,
        "confirmation": f.confirmation,
    }


def write_full(findings: Sequence[Finding], out: TextIO, show_source: bool = True) -> None:
    for f in findings:
        out.write(f"{f.filename}:{f.row}:{f.col}: {f.code} [{f.severity}] {f.message}\n")
        if show_source and f.line_text:
            gutter = len(str(f.row))
            pad = " " * gutter
            line = f.line_text.expandtabs(4) if "\t" in f.line_text else f.line_text
            start = max(f.col - 1, 0)
            end = f.end_col - 1 if f.end_row == f.row else len(line)
            width = max(1, end - start)
            out.write(f"{pad} |\n{f.row} | {line}\n{pad} | {' ' * start}{'^' * width} {f.code}\n{pad} |\n")
            _, _, hint, _ = rule_meta(f.code)
            if hint:
                out.write(f"{pad} = help: {hint}\n")
            if f.fix is not None:
                out.write(f"{pad} = fix ({f.fix.applicability}): {f.fix.message}\n")
            if f.confirmation:
                c = f.confirmation
                out.write(f"{pad} = {c.get('status')} ({c.get('backend')}): {c.get('evidence')}\n")
            out.write("\n")


def write_concise(findings: Sequence[Finding], out: TextIO) -> None:
    for f in findings:
        status = f" [{f.confirmation['status']}]" if f.confirmation else ""
        out.write(f"{f.filename}:{f.row}:{f.col}: {f.code} [{f.severity}] {f.message}{status}\n")


def write_json(findings: Sequence[Finding], out: TextIO) -> None:
    json.dump([finding_json(f) for f in findings], out, indent=2)
    out.write("\n")


def write_json_lines(findings: Sequence[Finding], out: TextIO) -> None:
    for f in findings:
        out.write(json.dumps(finding_json(f)) + "\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write_github(findings: Sequence[Finding], out: TextIO) -> None:
    command = {"error": "error", "warning": "warning", "info": "notice"}
    for f in findings:
        props = (f"file={_escape_property(f.filename)},line={f.row},col={f.col},"
                 f"endLine={f.end_row},endColumn={f.end_col},title={f.code}")
        out.write(f"::{command.get(f.severity, 'error')} {props}::"
                  f"{_escape_data(f'{f.code} {f.message}')}\n")


def _relative_uri(filename: str, root: Path) -> str:
    path = Path(filename)
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def sarif_log(findings: Sequence[Finding], root: Path, rule_codes: Iterable[str]) -> dict:
    codes = list(dict.fromkeys([*rule_codes, *(f.code for f in findings)]))
    rules_json, index = [], {}
    by_code = rules_by_code()
    for code in codes:
        name, summary, hint, level = rule_meta(code)
        rule = by_code.get(code)
        full = rule.explanation() if rule else summary
        index[code] = len(rules_json)
        rules_json.append({
            "id": code,
            "name": name,
            "shortDescription": {"text": summary},
            "fullDescription": {"text": full},
            "help": {"text": f"{hint}\n\n{full}", "markdown": rule.markdown() if rule else summary},
            "helpUri": rule_url(code),
            "defaultConfiguration": {"level": {"info": "note"}.get(level, level)},
            "properties": {"tags": ["dataparallel", "pytorch"]},
        })
    results = []
    occurrences: Counter = Counter()
    for f in findings:
        uri = _relative_uri(f.filename, root)
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
            **({"properties": {"confirmation": f.confirmation}} if f.confirmation else {}),
        })
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "dpcheck", "version": __version__, "semanticVersion": __version__,
                                "informationUri": "https://github.com/dpcheck/dpcheck",
                                "rules": rules_json}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root.resolve().as_uri() + "/"}},
            "results": results,
        }],
    }


def write_sarif(findings: Sequence[Finding], out: TextIO, root: Path, rule_codes: Iterable[str]) -> None:
    json.dump(sarif_log(findings, root, rule_codes), out, indent=2)
    out.write("\n")


def write_summary(findings: Sequence[Finding], out: TextIO, fixable: int = 0) -> None:
    if not findings:
        out.write("All checks passed!\n")
        return
    counts = Counter(f.severity for f in findings)
    parts = [f"{counts[s]} {s}{'s' if counts[s] != 1 else ''}" for s in ("error", "warning", "info")
             if counts[s]]
    out.write(f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} ({', '.join(parts)}).\n")
    if fixable:
        out.write(f"[*] {fixable} fixable with `--fix --unsafe-fixes`.\n")


def write_statistics(findings: Sequence[Finding], out: TextIO, as_json: bool = False) -> None:
    counts = Counter(f.code for f in findings)
    rows = [(code, counts[code], rule_meta(code)[0]) for code in sorted(counts, key=lambda c: (-counts[c], c))]
    if as_json:
        json.dump([{"code": c, "name": n, "count": k} for c, k, n in rows], out, indent=2)
        out.write("\n")
        return
    width = max((len(str(k)) for _, k, _ in rows), default=1)
    for code, count, name in rows:
        out.write(f"{count:>{width}}\t{code}\t{name}\n")
