"""Making offered fixes concrete (JSON/SARIF output) in worker processes: the same edits as
one at a time, and a worker that dies costs only its own file's edits."""

import os

import pytest

from dpcheck import engine
from dpcheck.fixes import cst as cstfix
from dpcheck.registry import all_rules
from dpcheck.run import _materialise_fixes

MODEL = '''import torch
import torch.nn as nn


class Net{n}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).cuda(0)  # keep this comment
'''

CRASH_MARK = "# this file kills the process making its fixes"


def _findings(paths):
    codes = tuple(r.code for r in all_rules())
    results, _ = engine.analyze_files(paths, codes, jobs=1)
    return engine.settle(results).findings, list(codes)


@pytest.fixture
def models(tmp_path):
    paths = []
    for n in range(3):
        path = tmp_path / f"m{n}.py"
        path.write_text(MODEL.format(n=n) + (CRASH_MARK + "\n" if n == 1 else ""))
        paths.append(path)
    return paths


def _offered(findings):
    return [f for f in findings if f.fix is not None and not f.fix.edits]


def test_parallel_edits_are_the_serial_edits(models):
    findings, codes = _findings(models)
    assert {f.filename for f in _offered(findings)} == {str(p) for p in models}
    serial = _materialise_fixes(findings, codes, jobs=1)
    parallel = _materialise_fixes(findings, codes, jobs=2)
    assert parallel == serial
    assert all(f.fix.edits for f in serial if f.fix is not None)
    assert {f.filename for f in serial if f.fix is not None} == {str(p) for p in models}


def test_a_worker_that_dies_costs_only_its_files_edits(models, monkeypatch):
    findings, codes = _findings(models)
    real = cstfix.materialise

    def dying(source, group, rules):
        if CRASH_MARK in source:
            os._exit(3)  # a crash in C code, the out-of-memory killer
        return real(source, group, rules)

    monkeypatch.setattr(cstfix, "materialise", dying)
    out = _materialise_fixes(findings, codes, jobs=2)
    assert [(f.filename, f.code, f.row) for f in out] == [(f.filename, f.code, f.row) for f in findings]
    crashed = [f for f in out if f.filename == str(models[1])]
    assert crashed and all(f.fix is None for f in crashed if f.code in {g.code for g in _offered(findings)})
    for path in (models[0], models[2]):
        assert any(f.fix is not None and f.fix.edits for f in out if f.filename == str(path))


def _square_or_die(n):
    if n == 2:
        os._exit(1)
    return n * n


def test_map_isolated_keeps_order_and_replaces_lost_tasks():
    assert engine.map_isolated(_square_or_die, [0, 1, 2, 3, 4], 2, lambda n: -n, size=lambda n: n) == \
        [0, 1, -2, 9, 16]
