"""[tool.dpcheck] in pyproject.toml or dpcheck.toml, as ruff reads its configuration."""

import json
from pathlib import Path

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


# --- Each file's closest configuration decides (as ruff resolves settings) -------------

def json_findings(proc):
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((f["filename"].rsplit("/", 2)[-2] + "/" + f["filename"].rsplit("/", 1)[-1], f["code"])
                  for f in json.loads(proc.stdout))


def two_projects(project, files_each=1):
    """Root config selects DP1; `a/` has its own config selecting DP3; `b/` has none."""
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP1"]\n')
    for folder in ("a", "b"):
        (project / folder).mkdir()
        for i in range(files_each):
            (project / folder / f"m{i}.py").write_text(HAZARD)
    (project / "a" / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP3"]\n')


def test_same_file_same_results_wherever_dpcheck_starts(project):
    two_projects(project)
    expected = [("a/m0.py", "DP301"), ("b/m0.py", "DP101")]
    from_root = json_findings(run_cli(".", "--no-cache", "--output-format", "json", cwd=project))
    from_outside = json_findings(run_cli(project.name, "--no-cache", "--output-format", "json", cwd=project.parent))
    assert from_root == from_outside == expected
    # Started inside `a`, the file named from there still gets a's settings; b's file gets the root's.
    from_a = json_findings(run_cli("m0.py", "../b/m0.py", "--no-cache", "--output-format", "json",
                                   cwd=project / "a"))
    assert from_a == expected


def test_per_file_selection_in_parallel_and_through_the_cache(project):
    two_projects(project, files_each=12)  # 24 files: the process pool runs
    sequential = json_findings(run_cli(".", "--no-cache", "-j", "1", "--output-format", "json", cwd=project))
    parallel = json_findings(run_cli(".", "--no-cache", "-j", "3", "--output-format", "json", cwd=project))
    cold = json_findings(run_cli(".", "-j", "3", "--output-format", "json", cwd=project))
    warm = json_findings(run_cli(".", "-j", "3", "--output-format", "json", cwd=project))
    assert sequential == parallel == cold == warm
    assert {c for f, c in sequential if f.startswith("a/")} == {"DP301"}
    assert {c for f, c in sequential if f.startswith("b/")} == {"DP101"}
    # A changed selection is never served the previous selection's cached results.
    (project / "a" / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP101"]\n')
    changed = json_findings(run_cli(".", "-j", "3", "--output-format", "json", cwd=project))
    assert {c for f, c in changed if f.startswith("a/")} == {"DP101"}


def test_dpcheck_toml_names_and_strength(project):
    (project / "m.py").write_text(HAZARD)
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP1"]\n')
    (project / "dpcheck.toml").write_text('select = ["DP3"]\n')
    assert codes(run_cli("m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP301"]
    (project / ".dpcheck.toml").write_text('[tool.dpcheck]\nselect = ["DP101"]\n')
    assert codes(run_cli("m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP101"]


def test_extend_inherits_relative_to_the_file_and_detects_cycles(project):
    (project / "base.toml").write_text('ignore = ["DP301"]\n[per-file-ignores]\n"gen_*.py" = ["DP1"]\n')
    sub = project / "sub"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.dpcheck]\nextend = "../base.toml"\nextend-ignore = ["DP102"]\n')
    (sub / "m.py").write_text(HAZARD)
    (sub / "gen_m.py").write_text(HAZARD)
    got = json_findings(run_cli(".", "--no-cache", "--output-format", "json", cwd=project))
    assert got == [("sub/m.py", "DP101")]
    # The extending file's keys win: its own `select` starts the selection afresh.
    (sub / "pyproject.toml").write_text('[tool.dpcheck]\nextend = "../base.toml"\nselect = ["DP3"]\n')
    assert json_findings(run_cli("sub/m.py", "--no-cache", "--output-format", "json", cwd=project)) \
        == [("sub/m.py", "DP301")]
    (project / "base.toml").write_text('extend = "sub/pyproject.toml"\n')
    proc = run_cli("sub/m.py", "--no-cache", cwd=project)
    assert proc.returncode == 2 and "cycle" in proc.stderr
    (sub / "pyproject.toml").write_text('[tool.dpcheck]\nextend = "../missing.toml"\n')
    proc = run_cli("sub/m.py", "--no-cache", cwd=project)
    assert proc.returncode == 2 and "missing.toml" in proc.stderr


def test_nested_config_excludes_apply_under_its_folder(project):
    sub = project / "sub"
    for folder in (project / "gen", sub / "gen", sub / "src"):
        folder.mkdir(parents=True)
        (folder / "m.py").write_text(HAZARD)
    (sub / "dpcheck.toml").write_text('extend-exclude = ["gen"]\n')
    shown = run_cli(".", "--show-files", cwd=project)
    assert shown.returncode == 0
    listed = sorted(Path(line).relative_to(project).as_posix() if Path(line).is_absolute() else line
                    for line in shown.stdout.split())
    assert listed == ["gen/m.py", "sub/src/m.py"]
    got = json_findings(run_cli(".", "--no-cache", "--output-format", "json", cwd=project))
    assert {f for f, _ in got} == {"gen/m.py", "src/m.py"}


def test_unknown_key_in_a_nested_config_is_an_error(project):
    (project / "sub").mkdir()
    (project / "sub" / "m.py").write_text(HAZARD)
    (project / "sub" / "dpcheck.toml").write_text('ignroe = ["DP1"]\n')
    proc = run_cli(".", "--no-cache", cwd=project)
    assert proc.returncode == 2 and "ignroe" in proc.stderr and "Traceback" not in proc.stderr


def test_config_option_applies_one_file_to_all_and_isolated_none(project):
    two_projects(project)
    (project / "other.toml").write_text('select = ["DP101"]\n')
    got = json_findings(run_cli(".", "--no-cache", "--config", "other.toml", "--output-format", "json", cwd=project))
    assert got == [("a/m0.py", "DP101"), ("b/m0.py", "DP101")]
    got = json_findings(run_cli(".", "--no-cache", "--isolated", "--output-format", "json", cwd=project))
    assert got == [("a/m0.py", "DP101"), ("a/m0.py", "DP301"), ("b/m0.py", "DP101"), ("b/m0.py", "DP301")]


def test_show_settings_prints_the_files_resolved_settings(project):
    two_projects(project)
    (project / "a" / "pyproject.toml").write_text(
        '[tool.dpcheck]\nselect = ["DP3"]\n[tool.dpcheck.per-file-ignores]\n"legacy/*.py" = ["DP301"]\n')
    proc = run_cli("--show-settings", "a/m0.py", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert f"config file: {(project / 'a' / 'pyproject.toml').resolve()}" in proc.stdout
    rules_line = next(line for line in proc.stdout.splitlines() if line.startswith("rules"))
    assert "DP301" in rules_line and "DP101" not in rules_line
    assert "legacy/*.py: [DP301]" in proc.stdout
    other = run_cli("--show-settings", "b/m0.py", cwd=project)
    assert f"config file: {(project / 'pyproject.toml').resolve()}" in other.stdout


def test_per_file_ignores_on_the_command_line_and_extend_per_file_ignores(project):
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(HAZARD)
    (project / "new.py").write_text(HAZARD)
    (project / "pyproject.toml").write_text(
        '[tool.dpcheck.per-file-ignores]\n"new.py" = ["DP301"]\n'
        '[tool.dpcheck.extend-per-file-ignores]\n"legacy/*.py" = ["DP101"]\n')
    run = lambda *a: json_findings(run_cli(".", "--no-cache", "--output-format", "json", *a, cwd=project))
    assert run() == [("legacy/old.py", "DP301"), (f"{project.name}/new.py", "DP101")]
    # --per-file-ignores replaces the file's mapping; --extend-per-file-ignores adds to it.
    got = run("--per-file-ignores", "legacy/*.py:DP3")
    assert got == [("legacy/old.py", "DP101"), (f"{project.name}/new.py", "DP101"),
                   (f"{project.name}/new.py", "DP301")]
    got = run("--extend-per-file-ignores", "new.py:DP1")
    assert got == [("legacy/old.py", "DP301")]
    assert run_cli(".", "--per-file-ignores", "no-colon", cwd=project).returncode == 2


def test_extend_ignore_on_the_command_line(project):
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nignore = ["DP101"]\n')
    (project / "m.py").write_text(HAZARD)
    assert codes(run_cli("m.py", "--no-cache", "--output-format", "json", "--extend-ignore", "DP301",
                         cwd=project)) == []
    assert codes(run_cli("m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP301"]
