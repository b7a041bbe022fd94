"""Every output format, checked against what its consumers expect."""

import json
from pathlib import Path

import jsonschema
from conftest import HAZARD, ROOT, run_cli


def write_hazard(project):
    (project / "model.py").write_text(HAZARD)
    return project / "model.py"


def test_json_uses_ruff_field_names(project):
    write_hazard(project)
    proc = run_cli("model.py", "--output-format", "json", "--no-cache", cwd=project)
    assert proc.returncode == 1
    findings = json.loads(proc.stdout)
    assert {f["code"] for f in findings} == {"DP101", "DP301"}
    f = next(f for f in findings if f["code"] == "DP101")
    assert set(f) >= {"code", "name", "message", "severity", "filename", "location", "end_location",
                      "fix", "url", "noqa_row", "confirmation"}
    assert f["name"] == "attribute-assigned-in-forward"
    assert f["severity"] == "error"
    assert f["location"] == {"row": 12, "column": 9}
    assert f["end_location"] == {"row": 12, "column": 19}
    assert Path(f["filename"]).is_absolute() and f["filename"].endswith("model.py")
    assert f["noqa_row"] == 12 and f["confirmation"] is None
    # The counter's fix: a buffer registered in __init__, updated in place in forward.
    assert f["fix"]["applicability"] == "unsafe" and [e["content"] for e in f["fix"]["edits"]] == [
        'register_buffer("steps", torch.tensor(0), persistent=False)', ".add_(1)"]
    assert f["url"].startswith("https://")
    fix = next(f for f in findings if f["code"] == "DP301")["fix"]
    assert fix["applicability"] == "unsafe"
    # The pinned device becomes the input's (forward's first argument), made concrete by libcst.
    assert fix["edits"] == [{"content": "x.device", "location": {"row": 13, "column": 30},
                             "end_location": {"row": 13, "column": 38}}]


def test_json_lines_one_object_per_line(project):
    write_hazard(project)
    proc = run_cli("model.py", "--output-format", "json-lines", "--no-cache", cwd=project)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2
    assert [json.loads(line)["code"] for line in lines] == ["DP101", "DP301"]


def test_sarif_validates_against_the_official_schema(project):
    write_hazard(project)
    proc = run_cli("model.py", "--output-format", "sarif", "--no-cache", cwd=project)
    assert proc.returncode == 1
    log = json.loads(proc.stdout)
    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(log, schema)
    run = log["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert {"DP101", "DP301"} <= set(rules)
    for rule in rules.values():
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["text"] and rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    result = next(r for r in run["results"] if r["ruleId"] == "DP101")
    assert result["level"] == "error" and result["message"]["text"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "model.py"  # repo-relative
    assert location["region"] == {"startLine": 12, "startColumn": 9, "endLine": 12, "endColumn": 19}
    assert result["partialFingerprints"]


def test_sarif_fingerprints_survive_line_moves(project):
    path = write_hazard(project)
    first = json.loads(run_cli("model.py", "--output-format", "sarif", "--no-cache", cwd=project).stdout)
    path.write_text("# a comment pushes everything down\n" + HAZARD)
    second = json.loads(run_cli("model.py", "--output-format", "sarif", "--no-cache", cwd=project).stdout)
    prints = lambda log: sorted(r["partialFingerprints"]["dpcheck/v1"] for r in log["runs"][0]["results"])
    assert prints(first) == prints(second)


def test_github_workflow_commands(project):
    write_hazard(project)
    proc = run_cli("model.py", "--output-format", "github", "--no-cache", cwd=project)
    line = proc.stdout.splitlines()[0]
    assert line.startswith("::error file=model.py,line=12,col=9,endLine=12,endColumn=19,title=DP101::DP101 ")


def test_full_format_shows_source_caret_and_help(project):
    write_hazard(project)
    proc = run_cli("model.py", "--no-cache", cwd=project)
    out = proc.stdout
    assert "model.py:12:9: DP101 [error]" in out
    assert "12 |         self.steps += 1" in out
    assert "   |         ^^^^^^^^^^ DP101" in out
    assert "= help:" in out
    assert "Found 2 findings (2 errors); 2 at or above --fail-level=warning fail the run." in out


def test_concise_is_one_line_per_finding(project):
    write_hazard(project)
    proc = run_cli("model.py", "--output-format", "concise", "--no-cache", "-q", cwd=project)
    assert proc.stdout.splitlines() == [
        line for line in proc.stdout.splitlines() if line.startswith("model.py:")]
    assert len(proc.stdout.splitlines()) == 2


def test_statistics_counts_per_code(project):
    (project / "a.py").write_text(HAZARD)
    (project / "b.py").write_text(HAZARD)
    proc = run_cli(".", "--statistics", "--no-cache", cwd=project)
    assert proc.returncode == 1
    rows = [line.split("\t") for line in proc.stdout.strip().splitlines()]
    assert sorted((r[1], r[0].strip()) for r in rows) == [("DP101", "2"), ("DP301", "2")]


def test_rule_infos_are_every_rules_metadata_made_on_first_read():
    from dpcheck.registry import all_rules, rule_infos

    infos = rule_infos()
    assert sorted(infos) == sorted(r.code for r in all_rules())
    assert len(infos) == len(all_rules())
    dp101 = next(r for r in all_rules() if r.code == "DP101")
    assert infos["DP101"] == dp101.info()
    assert infos["DP101"] is infos.get("DP101")  # made once
    assert infos.get("DP999") is None  # an unknown code: reporters fall back (Report.rule)
    assert dict(infos) == {r.code: r.info() for r in all_rules()}
