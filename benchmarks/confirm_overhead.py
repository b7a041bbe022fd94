"""The whole `dpcheck --confirm FILE` command against a plain script that runs the model once.

    python benchmarks/confirm_overhead.py                      # the fixture models below + real models
    python benchmarks/confirm_overhead.py FILE [FILE ...]      # files with a dpcheck_example
    python benchmarks/confirm_overhead.py --runs 7

Issue 12's target: the whole `dpcheck --confirm FILE` at most 1 s above a plain script that
imports and runs the model once. For each file: the median wall time of
`dpcheck --confirm FILE --no-cache --backend emulated --devices 2` (static analysis, the child
process, torch import, the harness at its three batch sizes, reporting) and of `python -c` a
plain script that imports the file, builds `dpcheck_example()` and runs one forward + backward
on the CPU, the two run alternately; prints both and the difference. Wall clock on a possibly shared machine: the load
(`os.getloadavg`) is printed with the numbers; medians of several runs. tests/real_models files
are included only where their libraries are installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ["fixtures/dp101/safe_buffers_and_init.py", "fixtures/dp101/flagged_counter_and_stash.py",
            "fixtures/dp401/flagged_scalar_losses.py", "fixtures/dp601/flagged_functional_harness_wrapped.py"]
REAL_MODELS = {"tests/real_models/torchvision_resnet18.py": "torchvision",
               "tests/real_models/timm_vit_tiny.py": "timm",
               "tests/real_models/transformers_bert.py": "transformers",
               "tests/real_models/transformers_gpt2.py": "transformers"}

# Imports the file as the harness does (its folder on sys.path), builds its example and runs
# one forward + backward: what a user's own smoke test of the model costs.
PLAIN = """
import importlib.util, sys, torch
path = sys.argv[1]
sys.path.insert(0, path.rsplit('/', 1)[0])
spec = importlib.util.spec_from_file_location('model_under_test', path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
example = module.dpcheck_example()
model, args = example[0], example[1]
kwargs = example[2] if len(example) > 2 else {}
out = model(*args, **kwargs)
def tensors(o):
    if isinstance(o, torch.Tensor):
        yield o
    elif isinstance(o, dict) or hasattr(o, 'values') and hasattr(o, 'keys'):
        for v in o.values():
            yield from tensors(v)
    elif isinstance(o, (list, tuple)):
        for v in o:
            yield from tensors(v)
loss = sum(t.float().sum() for t in tensors(out) if t.requires_grad)
if isinstance(loss, torch.Tensor):
    loss.backward()
"""


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return elapsed


def medians(first: list[str], second: list[str], runs: int) -> tuple[float, float]:
    """Median wall times of two commands run alternately, so that a load that comes and goes
    on a shared machine falls on both alike."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        samples[0].append(wall(first))
        samples[1].append(wall(second))
    return statistics.median(samples[0]), statistics.median(samples[1])


def default_files() -> list[str]:
    files = list(FIXTURES)
    files += [f for f, lib in REAL_MODELS.items() if importlib.util.find_spec(lib) is not None]
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    dpcheck = [sys.executable, "-m", "dpcheck"]
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; median of {args.runs} runs")
    print(f"{'file':58} {'plain s':>8} {'confirm s':>9} {'diff s':>7}")
    for file in args.files or default_files():
        plain, confirm = medians([sys.executable, "-c", PLAIN, str(ROOT / file)],
                                 [*dpcheck, "--confirm", file, "--no-cache", "--backend", "emulated", "--devices", "2",
                                  "--quiet"], args.runs)
        print(f"{file:58} {plain:8.2f} {confirm:9.2f} {confirm - plain:+7.2f}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
