"""[tool.dpcheck] in pyproject.toml or dpcheck.toml, as ruff reads its configuration."""

import json

from conftest import HAZARD, run_cli


def codes(proc):
    assert proc.returncode in (0, 1), proc.stderr
    return sorted(f["code"] for f in json.loads(proc.stdout))


def test_pyproject_select_and_ignore(project):
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nignore = ["DP301"]\n')
    (project / "m.py").write_text(HAZARD)
    assert codes(run_cli("m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP101"]
    # The command line overrides the file.
    assert codes(run_cli("m.py", "--no-cache", "--output-format", "json", "--select", "DP3",
                         "--isolated", cwd=project)) == ["DP301"]


def test_nearest_config_wins_and_dpcheck_toml_beats_pyproject(project):
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP1"]\n')
    sub = project / "sub"
    sub.mkdir()
    (sub / "m.py").write_text(HAZARD)
    assert codes(run_cli("sub/m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP101"]
    (sub / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP3"]\n')
    assert codes(run_cli("sub/m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP301"]
    (sub / "dpcheck.toml").write_text('select = ["DP101", "DP301"]\n')
    assert codes(run_cli("sub/m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP101", "DP301"]


def test_pyproject_without_table_is_skipped(project):
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP3"]\n')
    sub = project / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (sub / "m.py").write_text(HAZARD)
    assert codes(run_cli("sub/m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP301"]


def test_per_file_ignores(project):
    (project / "pyproject.toml").write_text(
        '[tool.dpcheck]\n[tool.dpcheck.per-file-ignores]\n"legacy/*.py" = ["DP1"]\n')
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(HAZARD)
    (project / "new.py").write_text(HAZARD)
    findings = json.loads(run_cli(".", "--no-cache", "--output-format", "json", cwd=project).stdout)
    got = sorted((f["filename"].rsplit("/", 1)[-1], f["code"]) for f in findings)
    assert got == [("new.py", "DP101"), ("new.py", "DP301"), ("old.py", "DP301")]


def test_output_format_from_config(project):
    (project / "pyproject.toml").write_text('[tool.dpcheck]\noutput-format = "concise"\n')
    (project / "m.py").write_text(HAZARD)
    proc = run_cli("m.py", "--no-cache", "-q", cwd=project)
    assert proc.stdout.splitlines()[0].startswith("m.py:12:9: DP101")


def test_unknown_key_or_code_is_an_error(project):
    (project / "m.py").write_text(HAZARD)
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nselekt = ["DP1"]\n')
    proc = run_cli("m.py", cwd=project)
    assert proc.returncode == 2 and "selekt" in proc.stderr
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nignore = ["DP777"]\n')
    proc = run_cli("m.py", cwd=project)
    assert proc.returncode == 2 and "DP777" in proc.stderr
    (project / "pyproject.toml").write_text('[tool.dpcheck\n')
    assert run_cli("m.py", cwd=project).returncode == 2


def test_exclude_and_extend_exclude_from_config(project):
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nextend-exclude = ["generated", "scripts/*.py"]\n')
    for folder in ("generated", "scripts", "src"):
        (project / folder).mkdir()
        (project / folder / "m.py").write_text(HAZARD)
    findings = json.loads(run_cli(".", "--no-cache", "--output-format", "json", cwd=project).stdout)
    assert {f["filename"].rsplit("/", 2)[-2] for f in findings} == {"src"}
