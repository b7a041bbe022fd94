"""Which files get checked: .gitignore, default excludes, explicit paths, --force-exclude."""

import json

from conftest import HAZARD, run_cli


def checked(proc):
    return sorted({f["filename"].split("/")[-2] + "/" + f["filename"].split("/")[-1]
                   for f in json.loads(proc.stdout)})


def test_default_excludes_and_gitignore(project):
    for folder in ("src", ".venv", "build", "node_modules", "ignored", "src/gen"):
        (project / folder).mkdir(parents=True, exist_ok=True)
        (project / folder / "m.py").write_text(HAZARD)
    (project / ".gitignore").write_text("ignored/\n")
    (project / "src" / ".gitignore").write_text("gen/\n!keep.py\n")
    (project / "src" / "gen" / "keep.py").write_text(HAZARD)
    proc = run_cli(".", "--no-cache", "--output-format", "json", cwd=project)
    assert checked(proc) == ["src/m.py"]
    proc = run_cli(".", "--no-cache", "--output-format", "json", "--no-respect-gitignore", cwd=project)
    assert checked(proc) == ["gen/keep.py", "gen/m.py", "ignored/m.py", "src/m.py"]


def test_explicit_paths_are_checked_unless_force_exclude(project):
    (project / "build").mkdir()
    (project / "build" / "m.py").write_text(HAZARD)
    assert run_cli("build/m.py", "--no-cache", cwd=project).returncode == 1
    assert run_cli("build/m.py", "--no-cache", "--force-exclude", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nforce-exclude = true\nextend-exclude = ["x.py"]\n')
    (project / "x.py").write_text(HAZARD)
    assert run_cli("x.py", "--no-cache", cwd=project).returncode == 0


def test_exclude_replaces_defaults(project):
    (project / "build").mkdir()
    (project / "build" / "m.py").write_text(HAZARD)
    (project / "other.py").write_text(HAZARD)
    proc = run_cli(".", "--no-cache", "--output-format", "json", "--exclude", "other.py", cwd=project)
    assert [f["filename"].rsplit("/", 2)[-2] for f in json.loads(proc.stdout)][:1] == ["build"]


def test_cross_file_base_class_and_pre_commit_style_single_file():
    # `Block(MyBase)` where MyBase(nn.Module) lives in another file of the package.
    proc = run_cli("fixtures/crossfile/pkg/blocks.py", "--no-cache", "--output-format", "json")
    assert sorted(f["code"] for f in json.loads(proc.stdout)) == ["DP101", "DP204"]


def test_plain_class_with_unknown_base_is_not_flagged(project):
    (project / "m.py").write_text(
        "from somewhere import Base\n\nclass A(Base):\n    def forward(self, x):\n        self.y = x\n        return x\n")
    assert run_cli("m.py", "--no-cache", cwd=project).returncode == 0


def test_a_folder_named_below_an_excluded_path_is_walked_unless_force_exclude(project):
    # `extend-exclude = ["vendor/models"]` keeps `dpcheck .` out of the folder, but naming the
    # folder (or one inside it) checks it, as a named file is checked; ruff behaves the same.
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nextend-exclude = ["vendor/models"]\n')
    for folder in ("vendor/models", "vendor/models/inner"):
        (project / folder).mkdir(parents=True)
        (project / folder / "m.py").write_text(HAZARD)
    assert checked(run_cli(".", "--no-cache", "--output-format", "json", cwd=project)) == []
    assert checked(run_cli("vendor/models", "--no-cache", "--output-format", "json", cwd=project)) == [
        "inner/m.py", "models/m.py"]
    assert checked(run_cli("vendor/models/inner", "--no-cache", "--output-format", "json", cwd=project)) == [
        "inner/m.py"]
    proc = run_cli("vendor/models/inner", "--no-cache", "--force-exclude", cwd=project)
    assert proc.returncode == 0 and "No Python files found" in proc.stderr


def test_no_file_found_is_said_on_stderr(project):
    (project / "empty").mkdir()
    proc = run_cli("empty", "--no-cache", cwd=project)
    assert proc.returncode == 0 and "warning: No Python files found under the given path(s)" in proc.stderr
    (project / "m.py").write_text(HAZARD)
    assert "No Python files" not in run_cli("m.py", "--no-cache", cwd=project).stderr
