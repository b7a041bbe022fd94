"""The --confirm harness's overhead per model, against the plain steps it runs.

    python benchmarks/harness_overhead.py                     # emulated GPUs (any machine)
    python benchmarks/harness_overhead.py --backend cuda      # two or more real GPUs
    python benchmarks/harness_overhead.py tests/real_models/*.py   # other models: FILE or FILE:FUNCTION

For each model (by default the fixture models below; or every `dpcheck_example*` function
of the files named), on the same backend: the time of one plain single-device forward +
backward and of one plain DataParallel forward + backward (replicate, scatter,
parallel_apply, gather, backward) at each batch size the harness runs, in the mode the
example returns, and the time of the harness comparing them at one batch size (2N) and at
its default three. Each ratio is the harness's time against the sum of the plain steps it
runs: one single-device and one DataParallel step per batch size, plus, when the example returns
a training-mode model, the eval pass's two steps at 2N in eval mode (issue 12's target: at most
2x), each time the statistic (`--stat`) of its samples. Everything else the harness does
(building the example at each batch size, copies, snapshots, the randomness probe, comparing) is
its overhead. In-process timings (no child process start or torch import, which `--confirm` adds
once per file).

The plain steps and the harness runs are interleaved: each of `--runs` rounds takes one sample of
every plain step and of each harness run (the harness first in every other round), so a host whose
clocks or caches change while the benchmark runs moves both sides of the ratio alike. The last
column is the spread of the ratio at 3 batch sizes over the rounds (min, median, max of each round's
harness time against the sum of that round's plain steps): one run shows whether 2x holds with
margin. (The sum of each step's fastest sample can be lower than any one round's sum: with `--stat
min` the ratio can lie above every round's.) `--stat min` (the fastest sample) and `--clock cpu`
(this process's CPU time) are steadier on a loaded machine; `--profile TOP` adds, for each model,
the harness's TOP functions by time (cProfile).
"""

from __future__ import annotations

import argparse
import importlib.util
import operator
import os
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


CLOCK = time.perf_counter


def plain_steps(example, backend, batch: int, rel: str, eval_mode: bool = False) -> list | None:
    """The plain single-device and DataParallel forward + backward at ``batch`` (``eval_mode``: with the
    model in eval mode, as the harness's eval pass runs it), each a function of no arguments run inside
    the backend's context; None where one raises (hazardous models may fail under DataParallel)."""
    from dpcheck.harness.runner import _normalise, _reduce

    with backend.context():
        model, inputs, kwargs = _normalise(example(batch))
        if eval_mode:
            model.eval()
        backend.place_module(model, 0)  # in the mode the example returns, as the harness runs it
        placed, placed_kw = backend.place(inputs, 0), backend.place(kwargs, 0)

    def single():
        loss = _reduce(model(*placed, **placed_kw))
        if loss is not None:
            loss.backward()

    def dataparallel():
        out = backend.dataparallel(model, tuple(placed), dict(placed_kw), lambda *a: None)
        loss = _reduce(out)
        if loss is not None:
            loss.backward()

    for step in (single, dataparallel):
        try:
            with backend.context():
                step()  # warm-up
        except Exception as exc:  # noqa: BLE001 - hazardous models may fail under DataParallel
            print(f"  ({rel}: the plain {step.__name__} step at batch {batch} raised {type(exc).__name__})")
            return None
    return [single, dataparallel]


def sample(fn, backend) -> float:
    """One run of ``fn`` on CLOCK (on cuda from an idle GPU to the end of its work). The backend's
    context is entered outside the clock; run_model enters it itself (once per model), as --confirm
    does."""
    import torch

    cuda = backend.name == "cuda"
    with backend.context():
        if cuda:
            torch.cuda.synchronize()
        start = CLOCK()
        fn()
        if cuda:
            torch.cuda.synchronize()
        return CLOCK() - start


def profile_model(rel, example, backend, runs: int, top: int) -> None:
    """The harness's own functions by time per run_model (three batch sizes), from cProfile on this
    clock over ``runs`` runs: where its time above the plain steps goes (the steps show as
    dataparallel, and forward and backward inside _run_batch_inner's own time)."""
    import cProfile
    import pstats

    from dpcheck.harness.runner import default_batch_sizes, run_model

    sizes = default_batch_sizes(backend.n)
    run_model(example, backend, sizes)  # warm-up
    profiler = cProfile.Profile(CLOCK)
    profiler.enable()
    for _ in range(runs):
        run_model(example, backend, sizes)
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    harness = str(HERE.parent / "dpcheck" / "harness")
    rows = sorted(((cumulative, total, calls, f"{Path(file).name}:{name}")
                   for (file, _, name), (calls, _, total, cumulative, _) in stats.items() if file.startswith(harness)),
                  reverse=True)[:top]
    print(f"  {rel}: cProfile, ms per run_model ({runs} runs; cumulative, own, calls per run)")
    for cumulative, total, calls, where in rows:
        print(f"    {cumulative / runs * 1e3:9.2f} {total / runs * 1e3:9.2f} {calls / runs:8.1f}  {where}")


def time_model(rel, example, backend, runs: int, statistic) -> None:
    """Print one row: the plain steps and the harness at 1 and at 3 batch sizes, each ratio against
    the plain steps at the batch sizes that harness run used, then the spread of that ratio at 3
    batch sizes over the rounds. The plain steps and the harness runs are interleaved: each round
    takes one sample of every plain step and of each harness run (harness first in every other
    round), so a host whose clocks or caches change during the benchmark moves both sides alike."""
    from dpcheck.harness.runner import _normalise, default_batch_sizes, run_model

    sizes = default_batch_sizes(backend.n)
    steps = {batch: plain_steps(example, backend, batch, rel) for batch in sizes}
    # The harness's eval pass (2N, eval mode) follows a training-mode run: its plain steps count too.
    training = _normalise(example(sizes[0]))[0].training
    eval_steps = plain_steps(example, backend, 2 * backend.n, rel, eval_mode=True) if training else []
    if any(found is None for found in (*steps.values(), eval_steps)):
        print(f"{rel:<42} (not timed: a plain step raised)")
        return

    def harness(batch_sizes):
        return lambda: run_model(example, backend, batch_sizes)

    one, three = harness(sizes[:1]), harness(sizes)
    plain = [(batch, step) for batch in sizes for step in steps[batch]] + [("eval", step) for step in eval_steps]
    for fn in (one, three):
        sample(fn, backend)  # warm-up
    times: dict = {"one": [], "three": [], "plain": [[] for _ in plain]}
    for round_ in range(runs):
        harness_first = round_ % 2 == 1
        if harness_first:
            times["one"].append(sample(one, backend))
            times["three"].append(sample(three, backend))
        for samples, (_, step) in zip(times["plain"], plain):
            samples.append(sample(step, backend))
        if not harness_first:
            times["one"].append(sample(one, backend))
            times["three"].append(sample(three, backend))

    def plain_sum(batches, pick) -> float:  # the plain steps those batch sizes run, with the eval pass's
        return sum(pick(samples) for samples, (batch, _) in zip(times["plain"], plain) if batch in batches)

    first = plain_sum({sizes[0], "eval"}, statistic)
    every = plain_sum({*sizes, "eval"}, statistic)
    harness_one, harness_three = statistic(times["one"]), statistic(times["three"])
    per_round = sorted(times["three"][r] / plain_sum({*sizes, "eval"}, operator.itemgetter(r)) for r in range(runs))
    spread = f"{per_round[0]:.2f} {statistics.median(per_round):.2f} {per_round[-1]:.2f}"
    print(f"{rel:<42} {first * 1e3:>9.2f} ms {harness_one * 1e3:>9.2f} ms {harness_one / first:>6.1f}x "
          f"{every * 1e3:>11.2f} ms {harness_three * 1e3:>10.2f} ms {harness_three / every:>6.1f}x {spread:>22}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="emulated", choices=["emulated", "cuda"])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stat", default="median", choices=["median", "min"])
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="cpu: this process's CPU time (all threads), steadier where other work shares the cores")
    parser.add_argument("--profile", type=int, default=0, metavar="TOP",
                        help="after each model's row, its TOP harness functions by time (cProfile, --runs runs)")
    parser.add_argument("models", nargs="*", help="FILE or FILE:FUNCTION (default: the fixture models)")
    args = parser.parse_args()

    # The OpenMP settings of the processes --confirm runs models in (one file at a time), before
    # torch loads OpenMP, which reads them once.
    from dpcheck.harness.processes import child_environment
    os.environ.update(child_environment(1))
    import torch

    from dpcheck.harness.runner import default_batch_sizes, make_backend

    backend = make_backend(args.backend, args.devices)
    statistic = min if args.stat == "min" else statistics.median
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    sizes = default_batch_sizes(backend.n)
    print(f"backend {backend.name}, {backend.n} devices, torch {torch.__version__}, batch sizes {sizes}, "
          f"{args.stat} of {args.runs} runs ({args.clock} clock), {torch.get_num_threads()} CPU threads per op "
          f"(OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}), load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'model':<42} {'plain at ' + str(sizes[0]):>12} {'harness':>12} {'ratio':>7} "
          f"{'plain at ' + ','.join(map(str, sizes)):>14} {'harness':>13} {'ratio':>7} {'per round min med max':>22}")
    for rel, example in [found for spec_text in (args.models or MODELS) for found in load(spec_text)]:
        time_model(rel, example, backend, args.runs, statistic)
        if args.profile:
            profile_model(rel, example, backend, args.runs, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
