"""What `--fix --unsafe-fixes` costs over a plain check (the target: at most 2x on
transformers' `models/`, because only files with a fix to apply are parsed with libcst).

    python benchmarks/fix_cost.py                      # transformers models/, 3 runs
    python benchmarks/fix_cost.py --corpus timm --runs 5

Each run checks (or fixes) a fresh copy of the corpus, as a whole process, with no cache;
the two commands alternate and the script prints their medians and the ratio, plus the
fixes the last run applied per code.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import CORPUS, fetch  # noqa: E402  (the zoo download lives in benchmarks/run.py)


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - start, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default="transformers-models", choices=sorted(CORPUS))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    source = fetch(args.corpus)
    dpcheck = [sys.executable, "-m", "dpcheck", "--isolated", "--no-cache", "--exit-zero", "-q"]
    plain, fixing, applied = [], [], Counter()
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "tree"
            shutil.copytree(source, copy)
            seconds, _ = timed([*dpcheck, str(copy)])
            plain.append(seconds)
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "tree"
            shutil.copytree(source, copy)
            seconds, out = timed([*dpcheck, "--fix", "--unsafe-fixes", "--show-fixes", str(copy)])
            fixing.append(seconds)
            applied = Counter()
            for line in out.splitlines():
                parts = line.split()
                if len(parts) >= 3 and parts[1] == "\u00d7":
                    applied[parts[2]] += int(parts[0])
    a, b = statistics.median(plain), statistics.median(fixing)
    print(f"{args.corpus}: check {a:.2f} s, --fix --unsafe-fixes {b:.2f} s (medians of {args.runs}); "
          f"ratio {b / a:.2f}x")
    print("fixes applied: " + (", ".join(f"{c} {n}" for c, n in sorted(applied.items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
