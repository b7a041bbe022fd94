"""The README stays in step with the code and with CI."""

import re
import shlex
import subprocess
import sys

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


# --- The README's install, pre-commit and command snippets work as copied -------------

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def code_blocks(kind=None):
    text = (ROOT / "README.md").read_text()
    return [body for lang, body in FENCE.findall(text) if kind is None or lang == kind]


def hook_ids():
    return set(re.findall(r"^- id: (\S+)", (ROOT / ".pre-commit-hooks.yaml").read_text(), re.M))


def pip_install_targets(line):
    """The requirement arguments of each `pip install` on a shell line."""
    words = shlex.split(line.split(" #", 1)[0].replace("- run:", ""))
    targets, current = [], None
    for word in words:
        if word in ("&&", ";", "|"):
            current = None
        elif current is not None and not word.startswith("-"):
            current.append(word)
        elif word == "install" and targets is not None and words[words.index(word) - 1] == "pip":
            current = []
            targets.append(current)
    return [t for group in targets for t in group]


def test_pip_install_snippets_name_a_source_not_pypi():
    """dpcheck is not on PyPI: every install of it must come from a clone or a VCS URL."""
    checked = 0
    for block in code_blocks():
        for line in block.splitlines():
            if "pip install" not in line:
                continue
            for target in pip_install_targets(line):
                checked += 1
                if target.startswith("dpcheck"):
                    assert re.fullmatch(r"dpcheck(\[[\w,]+\])? @ git\+https://\S+@\S+", target), line
                else:
                    assert target.startswith((".", "torch==", "git+")), line
    assert checked >= 4


def test_pre_commit_snippets_pin_a_commit_with_the_hook():
    snippets = [b for b in code_blocks("yaml") if "repos:" in b]
    assert snippets, "the README shows how to use the pre-commit hook"
    ids = hook_ids()
    hook_file = (ROOT / ".pre-commit-hooks.yaml").read_text()
    for snippet in snippets:
        for repo in re.split(r"^\s*- repo: ", snippet, flags=re.M)[1:]:
            used = re.findall(r"- id: (\S+)", repo)
            assert used
            if repo.startswith("local"):
                # A local hook repeats the published one: same entry and file types.
                entry = re.search(r"entry: (.+)", repo).group(1).strip()
                assert f"entry: {entry}" in hook_file and "types_or: [python, pyi]" in repo
                continue
            assert set(used) <= ids, f"hook ids {used} not all in .pre-commit-hooks.yaml {ids}"
            rev = re.search(r"rev: (\S+)", repo).group(1)
            tags = subprocess.run(["git", "tag"], cwd=ROOT, capture_output=True, text=True).stdout.split()
            assert re.fullmatch(r"[0-9a-f]{40}", rev) or rev in tags, \
                f"rev `{rev}` is neither a commit sha nor a tag of this repository"
            _check_commit_has_hooks(rev, used)


def _check_commit_has_hooks(rev, used):
    git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True)
    if git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
        return  # not a full git checkout (an sdist, a shallow CI clone): the history is not here
    assert git("cat-file", "-e", f"{rev}^{{commit}}").returncode == 0, f"{rev} is not a commit of this repository"
    assert git("merge-base", "--is-ancestor", rev, "HEAD").returncode == 0, f"{rev} is not in HEAD's history"
    at_rev = git("show", f"{rev}:.pre-commit-hooks.yaml").stdout
    for hook in used:
        assert f"- id: {hook}" in at_rev


def test_command_snippets_use_only_existing_options():
    help_text = subprocess.run([sys.executable, "-m", "dpcheck", "check", "--help"], capture_output=True,
                               text=True, cwd=ROOT).stdout
    rule_help = subprocess.run([sys.executable, "-m", "dpcheck", "rule", "--help"], capture_output=True,
                               text=True, cwd=ROOT).stdout
    checked = 0
    for block in code_blocks("sh") + code_blocks("yaml"):
        for line in block.splitlines():
            command = line.split(" #", 1)[0]
            for part in re.split(r"\|\||&&|\||;", command):
                words = part.replace("- run:", "").split()
                if not words or words[0] != "dpcheck":
                    continue
                known = rule_help if words[1:2] == ["rule"] else help_text
                for word in words[1:]:
                    if word.startswith("-") and word != "-":
                        flag = word.split("=", 1)[0]
                        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", known), f"{flag} in `{line}`"
                        checked += 1
    assert checked >= 10
