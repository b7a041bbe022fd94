"""The --confirm harness's overhead per model, against one plain DataParallel step.

    python benchmarks/harness_overhead.py                     # emulated GPUs (any machine)
    python benchmarks/harness_overhead.py --backend cuda      # two or more real GPUs

For each fixture model with a `dpcheck_example`, on the same backend: the median time of
one plain DataParallel forward + backward (replicate, scatter, parallel_apply, gather,
backward) at batch 2N, and the median time of the harness comparing it with a single
device at one batch size and at its default three. In-process timings (no child
process start or torch import, which `--confirm` adds once per file).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

MODELS = ["dp101/safe_buffers_and_init.py", "dp202/safe_module_lists.py", "dp501/safe_batch_first.py",
          "dp603/safe_squeeze_dim.py", "dp101/flagged_counter_and_stash.py", "dp401/flagged_scalar_losses.py"]


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dpcheck_example


def median_seconds(fn, runs: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="emulated", choices=["emulated", "cuda"])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import torch

    from dpcheck.harness.runner import _normalise, _reduce, default_batch_sizes, make_backend, run_model

    backend = make_backend(args.backend, args.devices)
    batch = 2 * backend.n
    print(f"backend {backend.name}, {backend.n} devices, torch {torch.__version__}, batch {batch}")
    print(f"{'model':<42} {'plain DP step':>14} {'harness 1 batch':>16} {'ratio':>7} {'harness 3 batches':>18} {'ratio':>7}")
    for rel in MODELS:
        example = load(HERE.parent / "fixtures" / rel)
        with backend.context():
            model, inputs, kwargs = _normalise(example(batch))
            backend.place_module(model, 0)
            model.eval()
            placed, placed_kw = backend.place(inputs, 0), backend.place(kwargs, 0)

            def plain():
                out = backend.dataparallel(model, tuple(placed), dict(placed_kw), lambda *a: None)
                loss = _reduce(out)
                if loss is not None:
                    loss.backward()
                if backend.name == "cuda":
                    torch.cuda.synchronize()

            try:
                plain_s = median_seconds(plain, args.runs)
            except Exception as exc:  # hazardous fixtures may fail under DataParallel: time the harness only
                plain_s = float("nan")
                print(f"  ({rel}: the plain step raised {type(exc).__name__})")
        one = median_seconds(lambda: run_model(example, backend, [batch]), max(3, args.runs // 2))
        three = median_seconds(lambda: run_model(example, backend, default_batch_sizes(backend.n)),
                               max(3, args.runs // 2))
        print(f"{rel:<42} {plain_s * 1e3:>11.2f} ms {one * 1e3:>13.2f} ms {one / plain_s:>6.1f}x "
              f"{three * 1e3:>15.2f} ms {three / plain_s:>6.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
