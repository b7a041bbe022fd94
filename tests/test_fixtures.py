"""The real CLI over fixtures/ reports exactly the findings marked `# expect: DPxxx`."""

import difflib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import snapshots
from conftest import FIXTURES, ROOT, run_json

from dpcheck.registry import all_rules

EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>DP\d{3}(?:\s*,\s*DP\d{3})*)")


def marked_lines(path):
    """(row, line) of a fixture; for a notebook, each code cell's rows (findings count rows in their cell)."""
    if path.suffix != ".ipynb":
        return enumerate(path.read_text().splitlines(), start=1)
    cells = json.loads(path.read_text())["cells"]
    return [(row, line) for cell in cells if cell["cell_type"] == "code"
            for row, line in enumerate("".join(cell["source"]).splitlines(), start=1)]


def expected_findings(folder=FIXTURES):
    expected = Counter()
    for path in sorted([*folder.rglob("*.py"), *folder.rglob("*.ipynb")]):
        if path.name.endswith(".fixed.py"):
            continue  # expected results of --fix (tests/test_fix_fixtures.py)
        for row, line in marked_lines(path):
            match = EXPECT.search(line)
            if match:
                for code in re.split(r"\s*,\s*", match.group("codes")):
                    expected[(path.relative_to(ROOT).as_posix(), row, code)] += 1
    return expected


OFF_BY_DEFAULT = {r.code for r in all_rules() if not r.default_enabled}


def as_counter(findings):
    return Counter((f["filename"].removeprefix(str(ROOT) + "/"), f["location"]["row"], f["code"])
                   for f in findings if not f["filename"].endswith(".fixed.py"))


def test_fixtures_report_exactly_the_marked_findings():
    # The default selection over everything; rules that are off by default are checked
    # in their own folders below.
    actual = as_counter(run_json("fixtures")[0])
    expected = Counter({k: v for k, v in expected_findings().items() if k[2] not in OFF_BY_DEFAULT})
    assert expected, "no expectations found"
    missing = expected - actual
    unexpected = actual - expected
    assert not missing and not unexpected, f"missing={sorted(missing)} unexpected={sorted(unexpected)}"


def test_off_by_default_rules_report_their_fixtures_when_selected():
    for code in sorted(OFF_BY_DEFAULT):
        folder = FIXTURES / code.lower()
        actual = as_counter(run_json(folder, "--select", code)[0])
        assert actual == expected_findings(folder)


def test_every_static_rule_has_flagged_and_safe_fixtures():
    expected_codes = {code for (_, _, code) in expected_findings()}
    for rule in all_rules():
        if rule.kind != "static":
            continue
        folder = FIXTURES / rule.code.lower()
        assert folder.is_dir(), f"{rule.code} has no fixtures folder"
        assert list(folder.glob("flagged_*.py")), f"{rule.code} has no flagged fixture"
        assert list(folder.glob("safe_*.py")), f"{rule.code} has no safe look-alike fixture"
        assert rule.code in expected_codes, f"{rule.code} is never expected in any fixture"


def test_safe_fixtures_are_clean():
    findings, _ = run_json(*sorted(FIXTURES.rglob("safe_*.py")), "--select", "ALL",
                           "--ignore", ",".join(sorted(OFF_BY_DEFAULT)))
    assert findings == []


# Snapshots: every finding of a rule over its folder, pinned with message, span and fix
# (tests/snapshots.py writes them; `--snapshot-update` rewrites them).

STATIC_CODES = [r.code for r in all_rules() if r.kind == "static"]


def _compare_or_update(path, actual, update):
    if update:
        if not path.exists() or path.read_text(encoding="utf-8") != actual:
            path.write_text(actual, encoding="utf-8")
        return
    rel = path.relative_to(ROOT).as_posix()
    assert path.exists(), f"{rel} is missing; write it with `{snapshots.UPDATE_COMMAND}` and review it"
    expected = path.read_text(encoding="utf-8")
    if expected != actual:
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                            f"{rel} (stored)", f"{rel} (now)"))
        pytest.fail(f"snapshot {rel} differs (if the change is intended: `{snapshots.UPDATE_COMMAND}`):\n{diff}",
                    pytrace=False)


@pytest.mark.parametrize("code", STATIC_CODES)
def test_fixture_snapshot(code, snapshot_update):
    path, actual, files, findings = snapshots.rule_snapshot(code)
    on_safe = [f for f in findings if Path(f.filename).name.startswith("safe_") and not f.suppressed]
    assert not on_safe, f"{code} reports safe look-alikes: {on_safe}"
    flagged = {Path(f.filename).name for f in findings}
    for path_ in files:
        if path_.name.startswith("flagged_"):
            assert path_.name in flagged, f"{code} reports nothing in {path_.relative_to(ROOT)}"
    _compare_or_update(path, actual, snapshot_update)


@pytest.mark.parametrize("name", snapshots.ENGINE_FOLDERS)
def test_engine_fixture_snapshot(name, snapshot_update):
    path, actual, _, findings = snapshots.engine_snapshot(name)
    assert findings, f"fixtures/{name} produced no findings at all"
    _compare_or_update(path, actual, snapshot_update)


def test_every_snapshot_belongs_to_a_checked_folder():
    # A snapshot left behind by a renamed or removed rule would otherwise never be compared.
    checked = {c.lower() for c in STATIC_CODES} | set(snapshots.ENGINE_FOLDERS)
    stray = sorted(p.parent.name for p in FIXTURES.rglob(snapshots.SNAPSHOT_NAME) if p.parent.name not in checked)
    assert not stray, f"snapshots without a test: {stray}"
