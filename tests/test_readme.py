"""The README stays in step with the code and with CI."""

from conftest import ROOT

from dpcheck.docs import render_readme


def test_rule_table_is_generated_from_the_rules():
    text = (ROOT / "README.md").read_text()
    assert render_readme(text) == text, "run `python -m dpcheck.docs` to refresh the README table"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = "pip install -q torch==2.13.0 -e '.[test]' && python -m pytest -q"
    assert command in readme and command in ci


def test_pre_commit_hook_definition():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text()
    for needle in ("id: dpcheck", "require_serial: true", "types_or: [python, pyi]", "--force-exclude"):
        assert needle in text
