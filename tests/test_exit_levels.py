"""Which findings fail a run (--fail-level), and --backend cuda on a machine without GPUs."""

import json

import pytest
from conftest import HAZARD, run_cli

# A ResNet block: BatchNorm gives only DP602, which is info (advice).
RESNET = '''import torch.nn as nn


class Block(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.conv = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)) + x)
'''


def test_info_findings_do_not_fail_the_run_by_default(project):
    (project / "resnet.py").write_text(RESNET)
    proc = run_cli("resnet.py", "--no-cache", cwd=project)
    assert "DP602 [info]" in proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "none at or above --fail-level=warning" in proc.stdout
    data = json.loads(run_cli("resnet.py", "--no-cache", "--output-format", "json", cwd=project).stdout)
    assert [f["code"] for f in data] == ["DP602"]


def test_fail_level_decides_which_severities_exit_1(project):
    (project / "resnet.py").write_text(RESNET)
    (project / "bad.py").write_text(HAZARD)  # DP101 error + DP301 error
    assert run_cli("resnet.py", "--no-cache", "--fail-level", "info", cwd=project).returncode == 1
    assert run_cli("resnet.py", "--no-cache", "--fail-level", "info", "--exit-zero", cwd=project).returncode == 0
    assert run_cli("bad.py", "--no-cache", "--fail-level", "error", cwd=project).returncode == 1
    both = run_cli(".", "--no-cache", "--fail-level", "error", cwd=project)
    assert both.returncode == 1
    assert "Found 3 findings (2 errors, 1 info); 2 at or above --fail-level=error fail the run." in both.stdout
    assert run_cli("resnet.py", "--fail-level", "bogus", cwd=project).returncode == 2


def test_fail_level_from_config(project):
    (project / "resnet.py").write_text(RESNET)
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nfail-level = "info"\n')
    proc = run_cli("resnet.py", "--no-cache", cwd=project)
    assert proc.returncode == 1
    assert "1 at or above --fail-level=info fails the run" in proc.stdout
    # The command line wins over the file.
    assert run_cli("resnet.py", "--no-cache", "--fail-level", "warning", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nfail-level = "loud"\n')
    proc = run_cli("resnet.py", "--no-cache", cwd=project)
    assert proc.returncode == 2 and "fail-level" in proc.stderr


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(_gpus() >= 2, reason="this machine has the GPUs the cuda backend needs")
def test_cuda_backend_without_gpus_is_a_usage_error(project):
    (project / "bad.py").write_text(HAZARD)
    proc = run_cli("bad.py", "--no-cache", "--confirm", "--backend", "cuda", "--output-format", "json",
                   cwd=project)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--backend cuda" in proc.stderr and "CUDA devices" in proc.stderr
    assert proc.stdout == ""  # nothing was run, so no findings marked not-run


@pytest.mark.gpu
def test_cuda_backend_probe_passes_on_gpus(project):
    if _gpus() < 2:
        pytest.skip("needs 2 GPUs")
    (project / "bad.py").write_text(HAZARD)
    proc = run_cli("bad.py", "--no-cache", "--confirm", "--backend", "cuda", "--output-format", "json",
                   cwd=project)
    assert proc.returncode in (0, 1), proc.stderr


def test_the_parent_does_not_import_torch_for_the_cuda_probe(project, monkeypatch):
    """The probe runs in a child; a fake python that reports 0 devices is believed."""
    import sys

    from dpcheck import run as run_module

    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)

        class Proc:
            stdout = "0\n"
        return Proc()

    monkeypatch.setattr("subprocess.run", fake_run)
    assert "has 0" in run_module._cuda_problem(None)
    assert calls and calls[0][0] == sys.executable and "torch.cuda.device_count" in calls[0][-1]
