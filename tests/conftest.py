import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def pytest_addoption(parser):
    parser.addoption("--snapshot-update", action="store_true", default=False,
                     help="rewrite the fixture snapshots (fixtures/*/snapshot.snap) instead of comparing")


@pytest.fixture
def snapshot_update(request):
    """True under `--snapshot-update`: snapshot tests write what they see instead of comparing."""
    return request.config.getoption("--snapshot-update")


def fixture_files(pattern="*.py", folder=FIXTURES):
    """Fixture model files, without the expected results of --fix (`*.fixed.py`, see
    tests/test_fix_fixtures.py), which are not fixtures of their own."""
    return [p for p in sorted(folder.rglob(pattern)) if not p.name.endswith(".fixed.py")]


def run_cli(*args, cwd=None, stdin=None, env=None, timeout=300):
    """Run the real `dpcheck` command in a child process; returns CompletedProcess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "dpcheck", *map(str, args)], cwd=cwd or ROOT,
                          input=stdin, capture_output=True, text=True, env=full_env, timeout=timeout)


def run_json(*args, cwd=None, stdin=None):
    proc = run_cli(*args, "--output-format", "json", "--no-cache", cwd=cwd, stdin=stdin)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout), proc


def file_context(text, module="m", filename=None):
    """The analysis' FileContext of ``text`` (dedented), built as analyze_source builds one."""
    import ast
    import textwrap

    from dpcheck.analysis.classes import collect_classes, module_status
    from dpcheck.analysis.context import FileContext
    from dpcheck.analysis.names import ImportMap
    from dpcheck.analysis.source import SourceFile
    from dpcheck.analysis.tree import TreeIndex

    text = textwrap.dedent(text)
    tree = ast.parse(text)
    imports = ImportMap(tree, module)
    classes = collect_classes(tree, imports, module)
    index = TreeIndex(tree)
    return FileContext(SourceFile(filename or f"{module}.py", text), tree, module, imports, classes,
                       module_status(classes, module, imports, index), index)


@pytest.fixture
def project(tmp_path):
    """A throwaway project folder with a git marker, so .gitignore and config apply."""
    (tmp_path / ".git").mkdir()
    return tmp_path


HAZARD = '''import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return self.fc(x).to("cuda:0")
'''

CLEAN = '''import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)
'''
