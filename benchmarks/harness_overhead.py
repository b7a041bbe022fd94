"""The --confirm harness's overhead per model, against one plain DataParallel step.

    python benchmarks/harness_overhead.py                     # emulated GPUs (any machine)
    python benchmarks/harness_overhead.py --backend cuda      # two or more real GPUs
    python benchmarks/harness_overhead.py tests/real_models/*.py   # other models: FILE or FILE:FUNCTION

For each model (by default the fixture models below; or every `dpcheck_example*` function
of the files named), on the same backend: the median time of one plain single-device
forward + backward and of one plain DataParallel forward + backward (replicate, scatter,
parallel_apply, gather, backward) at batch 2N, in the mode the example returns, and the median time of the harness
comparing them at one batch size and at its default three; each ratio is against the
sum of the two plain steps. In-process timings (no child process start or torch import,
which `--confirm` adds once per file).
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


def load(spec_text: str) -> list[tuple[str, object]]:
    """(label, example function) for FILE (each dpcheck_example* in it) or FILE:FUNCTION."""
    file, _, function = spec_text.partition(":")
    path = Path(file) if Path(file).exists() else HERE.parent / "fixtures" / file
    sys.path.insert(0, str(path.resolve().parent))  # an examples file imports its model file
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = [function] if function else sorted(n for n in vars(module) if n.startswith("dpcheck_example"))
    return [(f"{path.stem}:{n}" if len(names) > 1 or function else path.stem, getattr(module, n)) for n in names]


def median_seconds(fn, runs: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def time_model(rel, example, backend, batch: int, runs: int) -> None:
    """Print one row: the plain single-device and DataParallel steps, and the harness at 1 and 3 batches."""
    import torch

    from dpcheck.harness.runner import _normalise, _reduce, default_batch_sizes, run_model

    with backend.context():
        model, inputs, kwargs = _normalise(example(batch))
        backend.place_module(model, 0)  # in the mode the example returns, as the harness runs it
        placed, placed_kw = backend.place(inputs, 0), backend.place(kwargs, 0)

        def single():
            loss = _reduce(model(*placed, **placed_kw))
            if loss is not None:
                loss.backward()
            if backend.name == "cuda":
                torch.cuda.synchronize()

        def dataparallel():
            out = backend.dataparallel(model, tuple(placed), dict(placed_kw), lambda *a: None)
            loss = _reduce(out)
            if loss is not None:
                loss.backward()
            if backend.name == "cuda":
                torch.cuda.synchronize()

        steps = []
        for step in (single, dataparallel):
            try:
                steps.append(median_seconds(step, runs))
            except Exception as exc:  # noqa: BLE001 - hazardous models may fail under DataParallel
                steps.append(float("nan"))
                print(f"  ({rel}: the plain {step.__name__} step raised {type(exc).__name__})")
    both = sum(steps)
    one = median_seconds(lambda: run_model(example, backend, [batch]), max(3, runs // 2))
    three = median_seconds(lambda: run_model(example, backend, default_batch_sizes(backend.n)), max(3, runs // 2))
    print(f"{rel:<42} {steps[0] * 1e3:>8.2f} ms {steps[1] * 1e3:>11.2f} ms {one * 1e3:>13.2f} ms "
          f"{one / both:>6.1f}x {three * 1e3:>15.2f} ms {three / both:>6.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="emulated", choices=["emulated", "cuda"])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("models", nargs="*", help="FILE or FILE:FUNCTION (default: the fixture models)")
    args = parser.parse_args()

    import torch

    from dpcheck.harness.runner import make_backend

    backend = make_backend(args.backend, args.devices)
    batch = 2 * backend.n
    print(f"backend {backend.name}, {backend.n} devices, torch {torch.__version__}, batch {batch}")
    print(f"{'model':<42} {'1 device':>11} {'plain DP step':>14} {'harness 1 batch':>16} {'ratio':>7} "
          f"{'harness 3 batches':>18} {'ratio':>7}")
    for rel, example in [found for spec_text in (args.models or MODELS) for found in load(spec_text)]:
        time_model(rel, example, backend, batch, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
