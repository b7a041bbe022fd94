"""Time dpcheck against ruff, a single-process libcst parse and TorchFix on real model zoos.

    pip install -e '.[bench]'          # ruff, libcst, torchfix
    python benchmarks/run.py                       # all corpora, 3 runs each
    python benchmarks/run.py --corpus timm --runs 5

Corpora are the `.py` files of the wheels `pip download --no-deps` fetches (torchvision,
timm, and transformers' `models/` tree), unpacked under benchmarks/corpora/ (ignored by
git). Each tool runs as a whole process, alternating with the others, several times;
the script prints medians, the ratios the speed targets are about, peak resident
memory, and the per-file wall time of a single-file dpcheck run (the pre-commit case):
with this environment's dpcheck (an editable install when set up as above), then as a
regular install of a wheel built from this tree in a fresh virtual environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPORA = HERE / "corpora"
# wheel name, the folder to scan inside the unpacked wheel
CORPUS = {
    "torchvision": ("torchvision", "torchvision"),
    "timm": ("timm", "timm"),
    "transformers-models": ("transformers", "transformers/models"),
}

# The speed targets (the developers' guide): cold at most 0.1x a one-process libcst parse,
# warm at most 0.5x `ruff check --no-cache`, one file at most 0.15 s.
COLD_VS_LIBCST, WARM_VS_RUFF, ONE_FILE_SECONDS = 0.1, 0.5, 0.15

PARSE_SCRIPT = """
import sys, pathlib, libcst
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    try:
        libcst.parse_module(path.read_bytes())
    except Exception:
        pass
"""


def fetch(corpus: str) -> Path:
    wheel_name, inner = CORPUS[corpus]
    target = CORPORA / wheel_name
    if not target.exists():
        CORPORA.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                            wheel_name], check=True)
            wheel = next(Path(tmp).glob("*.whl"))
            with zipfile.ZipFile(wheel) as zf:
                for member in zf.namelist():
                    if member.endswith(".py"):
                        zf.extract(member, target)
    return target / inner


# Python tools run as installed ones do: with their bytecode cached. A shell that sets
# PYTHONDONTWRITEBYTECODE (some sandboxes and CI images do) would otherwise make every run
# of an editable install compile dpcheck from source again (about 0.25 s per process).
TOOL_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], cwd: Path | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB of the largest process, exit code) of one whole run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=TOOL_ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def _tool(name: str) -> list[str] | None:
    """The command for a tool installed next to this Python, or on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return [str(beside)]
    found = shutil.which(name)
    return [found] if found else None


def tool_commands(tree: Path, cache_dir: Path) -> dict[str, list[str]]:
    dpcheck = [sys.executable, "-m", "dpcheck"]
    commands = {
        "dpcheck cold": [*dpcheck, str(tree), "--no-cache", "--exit-zero", "-q", "--output-format", "concise"],
        "dpcheck warm": [*dpcheck, str(tree), "--cache-dir", str(cache_dir), "--exit-zero", "-q",
                         "--output-format", "concise"],
    }
    ruff = _tool("ruff")
    if ruff:
        commands["ruff --no-cache"] = [*ruff, "check", "--no-cache", "--exit-zero", "-q", "--isolated", str(tree)]
    try:
        import libcst  # noqa: F401
        commands["libcst parse (1 process)"] = [sys.executable, "-c", PARSE_SCRIPT, str(tree)]
    except ImportError:
        pass
    torchfix = _tool("torchfix")
    if torchfix:
        commands["torchfix"] = [*torchfix, str(tree)]
    return commands


def bench(corpus: str, runs: int, skip: set[str]) -> dict[str, tuple[float, float]]:
    tree = fetch(corpus)
    files = list(tree.rglob("*.py"))
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    print(f"\n## {corpus}: {len(files)} files, {lines:,} lines ({tree.relative_to(HERE)})")
    with tempfile.TemporaryDirectory() as cache:
        commands = {k: v for k, v in tool_commands(tree, Path(cache)).items() if k not in skip}
        timed(commands["dpcheck warm"])  # fill the cache
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(runs):  # alternate the tools so machine drift hits all alike
            for name, cmd in commands.items():
                wall, rss, _code = timed(cmd)
                samples[name].append((wall, rss))
    medians = {name: (statistics.median(w for w, _ in s), max(r for _, r in s)) for name, s in samples.items()}
    for name, (wall, rss) in medians.items():
        print(f"{name:<28} {wall:8.2f} s   peak RSS {rss:7.0f} MiB")
    ratio = lambda a, b: medians[a][0] / medians[b][0] if a in medians and b in medians else None
    for label, a, b, target in [
        ("cold / libcst parse", "dpcheck cold", "libcst parse (1 process)", f"<= {COLD_VS_LIBCST}"),
        ("warm / ruff", "dpcheck warm", "ruff --no-cache", f"<= {WARM_VS_RUFF}"),
        ("cold / ruff", "dpcheck cold", "ruff --no-cache", None),
        ("torchfix / cold", "torchfix", "dpcheck cold", None),
    ]:
        value = ratio(a, b)
        if value is not None:
            print(f"ratio {label:<22} {value:6.2f}" + (f"   (target {target})" if target else ""))
    return medians


def single_file(runs: int) -> None:
    """The pre-commit / editor case: one file, interpreter start included."""
    target = HERE.parent / "fixtures" / "dp101" / "flagged_counter_and_stash.py"
    cmd = [sys.executable, "-m", "dpcheck", str(target), "--no-cache", "--exit-zero", "-q"]
    timed(cmd)  # the first run of a fresh install writes the bytecode cache
    walls = [timed(cmd)[0] for _ in range(runs)]
    print(f"\n## one file, whole process: median {statistics.median(walls):.3f} s (target <= {ONE_FILE_SECONDS} s)")
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "dpcheck", "--version"],
                         capture_output=True, text=True).stderr.splitlines()
    total = [line for line in out if line.rstrip().endswith("| dpcheck.cli")]
    if total:
        print("import time of dpcheck.cli (us, cumulative):", total[-1].split("|")[1].strip())
    print("torch imported on the static path:", any(line.rstrip().endswith("| torch") for line in out))
    installed_single_file(target, runs)


def installed_single_file(target: Path, runs: int) -> None:
    """The same file, timed with dpcheck installed as a user gets it: a wheel built from this
    tree and installed (no editable finder, no source tree on sys.path) into a fresh virtual
    environment. Offline: the wheel is built with this environment's setuptools."""
    with tempfile.TemporaryDirectory(prefix="dpcheck-bench-") as tmp:
        wheels, venv = Path(tmp) / "wheels", Path(tmp) / "venv"
        steps = [[sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                  str(HERE.parent)],
                 [sys.executable, "-m", "venv", str(venv)]]
        for step in steps:
            built = subprocess.run(step, capture_output=True, text=True)
            if built.returncode != 0:
                print(f"one file, regular install: not measured ({' '.join(step[1:4])} failed: "
                      f"{(built.stderr.strip().splitlines() or ['?'])[-1]})")
                return
        python = str(venv / "bin" / "python")
        wheel = next(wheels.glob("dpcheck-*.whl"))
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                       capture_output=True)
        cmd = [python, "-m", "dpcheck", str(target), "--no-cache", "--exit-zero", "-q"]
        timed(cmd, cwd=Path(tmp))  # writes the bytecode cache
        walls = [timed(cmd, cwd=Path(tmp))[0] for _ in range(runs)]
        start = [timed([python, "-c", "pass"], cwd=Path(tmp))[0] for _ in range(runs)]
        print(f"one file, regular install (pip install of a wheel, fresh venv): median {statistics.median(walls):.3f} s "
              f"(`python -c pass` there: {statistics.median(start):.3f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", choices=list(CORPUS), help="default: all")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip", action="append", default=[], help="a tool name to leave out, e.g. torchfix")
    args = parser.parse_args()
    for corpus in args.corpus or list(CORPUS):
        bench(corpus, args.runs, set(args.skip))
    single_file(max(args.runs, 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
