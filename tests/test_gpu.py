"""On real GPUs: the cuda backend gives the same verdicts as the emulation.

Run on a machine with two or more GPUs (the device tool):
    python -m pytest -q -m gpu tests/test_gpu.py
Set DPCHECK_GPU_REPORT=path to keep both backends' results as JSON.
"""

import json
import os

import pytest
from conftest import ROOT, fixture_files, run_cli

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two or more CUDA GPUs")]

CUDA_ONLY = {"DP808"}  # peak memory per device: the emulation has none to measure


def confirm(backend, devices):
    example_files = [p for p in fixture_files() if "def dpcheck_example" in p.read_text()]
    proc = run_cli(*example_files, "--confirm", "--backend", backend, "--devices", devices, "--output-format",
                   "json", "--no-cache", "--select", "ALL", "--ignore", "DP708", timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads(proc.stdout)


def confirm_skipped(name: str) -> bool:
    """The fixture says on its first line (`# confirm-skip: why`) that --confirm cannot give it a
    stable verdict (a race between replica threads, ...)."""
    lines = (ROOT / name).read_text().splitlines()
    return bool(lines) and "# confirm-skip:" in lines[0]


def verdicts(results):
    """(static finding -> confirmation status, file -> dynamic codes); a confirm-skip fixture's
    dynamic codes are left out (its own first line says they depend on timing), its static
    findings are compared like every other's."""
    static, dynamic = {}, {}
    for f in results:
        name = f["filename"].removeprefix(str(ROOT) + "/")
        if f["code"].startswith("DP8"):
            if f["code"] not in CUDA_ONLY and not confirm_skipped(name):
                dynamic.setdefault(name, set()).add(f["code"])
        else:
            static[(name, f["location"]["row"], f["location"]["column"], f["code"])] = f["confirmation"]["status"]
    return static, dynamic


@pytest.mark.parametrize("devices", [2, 4])
def test_cuda_backend_gives_the_emulations_verdicts(devices):
    if torch.cuda.device_count() < devices:
        pytest.skip(f"needs {devices} GPUs")
    emulated, cuda = confirm("emulated", str(devices)), confirm("cuda", str(devices))
    if os.environ.get("DPCHECK_GPU_REPORT"):
        with open(f"{os.environ['DPCHECK_GPU_REPORT']}.{devices}.json", "w") as out:
            json.dump({"emulated": emulated, "cuda": cuda}, out, indent=1)
    assert all(f["confirmation"]["backend"].startswith("cuda") for f in cuda)
    e_static, e_dynamic = verdicts(emulated)
    c_static, c_dynamic = verdicts(cuda)
    assert e_static.keys() == c_static.keys()
    differing = {k: (e_static[k], c_static[k]) for k in e_static if e_static[k] != c_static[k]}
    assert not differing, f"static verdicts differ (emulated, cuda): {differing}"
    assert e_dynamic == c_dynamic


def test_device0_memory_imbalance_is_measured_on_real_gpus():
    proc = run_cli("fixtures/dp808", "--confirm", "--backend", "cuda", "--output-format", "json", "--no-cache")
    codes = {(f["filename"].rsplit("/", 1)[-1], f["code"]) for f in json.loads(proc.stdout)}
    assert ("flagged_large_gathered_output.py", "DP808") in codes
    assert not any(name.startswith("safe_") for name, _ in codes)
