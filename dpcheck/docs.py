"""Generate the README's rule table from the rules themselves.

`python -m dpcheck.docs` rewrites the table between the markers in README.md;
a test fails when the README is out of step with the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dpcheck.registry import all_rules

START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def rule_table() -> str:
    rows = ["| Code | Name | Severity | Kind | What it finds |", "|---|---|---|---|---|"]
    for rule in all_rules():
        severity = rule.severity.value + ("" if rule.default_enabled else " (off by default)")
        summary = rule.summary.replace("|", "\\|")
        rows.append(f"| {rule.code} | `{rule.name}` | {severity} | {rule.kind} | {summary} |")
    return "\n".join(rows)


def render_readme(text: str) -> str:
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    if not rest:
        raise ValueError(f"README has no {START} marker")
    return f"{head}{START}\n{rule_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else Path("README.md")
    text = path.read_text(encoding="utf-8")
    new = render_readme(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        print(f"updated the rule table in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
