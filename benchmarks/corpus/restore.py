"""Restore the project and held-out corpora from manifest.tsv (public code kept out of this repository).

    python benchmarks/corpus/restore.py            # download every listed file that is missing
    python benchmarks/corpus/restore.py --check    # only list the missing ones (exit 1 if any)
    python benchmarks/corpus/restore.py --mirrors DIR   # read them from local git clones instead

Each manifest row names a file's repository, path and commit; the file is read from
raw.githubusercontent.com at that commit (or, with --mirrors, from the clone
DIR/<owner>+<name>/repo, whose history holds that commit) and written, unmodified, to its local path under
benchmarks/corpus/. The files are public code, so they are not committed: verdicts.tsv and
misses.tsv refer to them by these paths and lines, and precision.py skips a corpus whose
folder is absent.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import urllib.request
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent
MANIFEST = CORPUS_DIR / "manifest.tsv"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def rows() -> list[dict[str, str]]:
    with MANIFEST.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list missing files, download nothing")
    parser.add_argument(
        "--mirrors",
        type=Path,
        help="read files from git clones DIR/<owner>+<name>/repo (machines without GitHub access)",
    )
    args = parser.parse_args(argv)
    missing = [row for row in rows() if not (CORPUS_DIR / row["local_path"]).is_file()]
    for row in missing:
        target = CORPUS_DIR / row["local_path"]
        if args.check:
            print(f"missing: {row['local_path']}")
            continue
        data = read_from_mirror(args.mirrors, row) if args.mirrors else read_from_github(row)
        if data is None:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        print(f"restored: {row['local_path']}")
    still_missing = sum(not (CORPUS_DIR / row["local_path"]).is_file() for row in missing)
    print(f"{len(rows()) - still_missing} of {len(rows())} manifest files present", file=sys.stderr)
    return 1 if still_missing else 0


def read_from_github(row: dict[str, str]) -> bytes | None:
    url = RAW_URL.format(**row)
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read()
    except OSError as error:
        print(f"failed: {row['local_path']}: {url}: {error}", file=sys.stderr)
        return None


def read_from_mirror(mirrors: Path, row: dict[str, str]) -> bytes | None:
    clone = mirrors / row["repo"].replace("/", "+") / "repo"
    git_dir = clone / ".git" if (clone / ".git").is_dir() else clone
    shown = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{row['commit']}:{row['path']}"],
        capture_output=True,
    )
    if shown.returncode != 0:
        reason = shown.stderr.decode(errors="replace").strip()
        print(f"failed: {row['local_path']}: {git_dir}: {reason}", file=sys.stderr)
        return None
    return shown.stdout


if __name__ == "__main__":
    sys.exit(main())
