"""Before/after fix pairs, like TorchFix's .in.py/.out.py: `fixtures/dpNNN/X.py` fixed with
`--fix --unsafe-fixes --select DPNNN` becomes exactly `X.fixed.py`, which that rule no
longer flags where it offered a fix, and which a second run leaves unchanged. Where the
pair defines `dpcheck_example`, the fixed model confirms no hazard of that code under the
(emulated) DataParallel harness: the fix removes the hazard, not only the finding.
"""

import difflib
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

PAIRS = sorted(FIXTURES.rglob("*.fixed.py"))


def _source_of(fixed):
    return fixed.with_name(fixed.name.replace(".fixed.py", ".py"))


def _code_of(fixed):
    return fixed.parent.name.upper()


def test_every_fixable_rule_has_a_pair():
    from dpcheck.registry import all_rules

    fixable = {r.code for r in all_rules() if r.fix is not r.__mro__[-2].fix}
    assert fixable and fixable <= {_code_of(p) for p in PAIRS}


@pytest.mark.parametrize("fixed", PAIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fix_gives_the_expected_file(fixed, tmp_path):
    code = _code_of(fixed)
    work = tmp_path / _source_of(fixed).name
    shutil.copy(_source_of(fixed), work)
    args = ("--isolated", "--no-cache", "--select", code)
    before = json.loads(run_cli(work.name, *args, "--output-format", "json", "--unsafe-fixes", cwd=tmp_path).stdout)
    offered = [f for f in before if f["fix"] is not None]
    assert offered, f"{code} offers no fix in {fixed.name}"
    run_cli(work.name, *args, "--fix", "--unsafe-fixes", cwd=tmp_path)
    assert work.read_text() == fixed.read_text()
    after = json.loads(run_cli(work.name, *args, "--output-format", "json", cwd=tmp_path).stdout)
    assert [f for f in after if f["fix"] is not None] == []
    # What was fixed is not flagged again (a call moved to `.module` may get the warning
    # that it bypasses DataParallel: a different finding, which the fix message announces).
    remaining, was, fixed_now = (Counter(f["message"] for f in group) for group in (after, before, offered))
    for message in fixed_now:
        assert remaining[message] <= was[message] - fixed_now[message], message
    assert not any(f["location"]["row"] in changed_rows(fixed) for f in after if f["severity"] == "error")
    again = run_cli(work.name, *args, "--fix", "--unsafe-fixes", cwd=tmp_path)
    assert work.read_text() == fixed.read_text() and "Fixed" not in again.stderr


def _fixable_codes():
    from dpcheck.registry import all_rules

    return sorted(r.code for r in all_rules() if r.fix is not r.__mro__[-2].fix)


@pytest.mark.parametrize("code", _fixable_codes())
def test_every_offered_fix_makes_an_edit(code):
    """What the text report marks fixable (`[*]`, decided from the static check's offer alone,
    without libcst) is what the rule's fixer can do: the JSON report, which makes each offer
    concrete, carries edits for exactly those findings. An offer the fixer then declines would
    print `[*]` and "fixable" and leave the file unchanged under --fix."""
    folder = FIXTURES / code.lower()
    args = ("--isolated", "--no-cache", "--select", code, "--unsafe-fixes", "--exit-zero")
    concise = run_cli(*args, "--output-format", "concise", ".", cwd=folder).stdout
    marked = {tuple(line.split(":")[:3]) for line in concise.splitlines() if f" {code} [*] " in line}
    findings = json.loads(run_cli(*args, "--output-format", "json", ".", cwd=folder).stdout)
    made = {(str(Path(f["filename"]).relative_to(folder)), str(f["location"]["row"]), str(f["location"]["column"]))
            for f in findings if f["fix"] is not None}
    assert marked, f"no {code} fixture offers a fix"
    assert marked == made


CONFIRMABLE = [p for p in PAIRS if "def dpcheck_example" in p.read_text()]


@pytest.mark.parametrize("fixed", CONFIRMABLE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixed_model_confirms_no_hazard_of_that_code(fixed, tmp_path):
    pytest.importorskip("torch")
    code = _code_of(fixed)
    work = tmp_path / "fixed_model.py"
    shutil.copy(fixed, work)
    proc = run_cli(work.name, "--isolated", "--no-cache", "--confirm", "--backend", "emulated",
                   "--select", "ALL", "--output-format", "json", "--timeout", "120", cwd=tmp_path)
    findings = json.loads(proc.stdout)
    confirmed = [f for f in findings if f["code"] == code and (f["confirmation"] or {}).get("status") == "confirmed"
                 and f["location"]["row"] in changed_rows(fixed)]
    assert confirmed == [], confirmed
    assert any((f["confirmation"] or {}).get("status") for f in findings) or not findings, proc.stderr


def changed_rows(fixed):
    """Rows of ``fixed`` that the fix changed."""
    old, new = _source_of(fixed).read_text().splitlines(), fixed.read_text().splitlines()
    rows = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
        if tag != "equal":
            rows.update(range(j1 + 1, j2 + 1))
    return rows


PAD_PACKED = sorted(p for p in (FIXTURES / "dp405").glob("flagged_*.py")
                    if not p.name.endswith(".fixed.py") and "def dpcheck_example" in p.read_text())


@pytest.mark.parametrize("source", PAD_PACKED, ids=lambda p: p.name)
def test_total_length_fix_names_a_tensor_where_it_is_read(source, tmp_path):
    """DP405's `total_length=x.size(1)` must name a value that still holds the padded tensor where
    pad_packed_sequence runs: where `x` was rebound to a PackedSequence (`x, _ = self.rnn(packed)`),
    `x.size` raises. Fix every flagged example, then run its model's forward."""
    torch = pytest.importorskip("torch")
    import importlib.util

    work = tmp_path / source.name
    shutil.copy(source, work)
    run_cli(work.name, "--isolated", "--no-cache", "--select", "DP405", "--fix", "--unsafe-fixes", cwd=tmp_path)
    spec = importlib.util.spec_from_file_location(f"fixed_{source.stem}", work)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, args = module.dpcheck_example()
    with torch.no_grad():
        model(*args)
