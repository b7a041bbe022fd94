"""Restore the project and held-out corpora from manifest.tsv (public code kept out of this repository).

    python benchmarks/corpus/restore.py            # download every listed file that is missing
    python benchmarks/corpus/restore.py --check    # only list the missing ones (exit 1 if any)
    python benchmarks/corpus/restore.py --mirrors DIR   # read them from local git clones instead
    python benchmarks/corpus/restore.py --whole    # also the whole repositories of whole.tsv

Each manifest row names a file's repository, path and commit; the file is read from
raw.githubusercontent.com at that commit (or, with --mirrors, from the clone
DIR/<owner>+<name>/repo, whose history holds that commit) and written, unmodified, to its local path under
benchmarks/corpus/. The files are public code, so they are not committed: verdicts.tsv and
misses.tsv refer to them by these paths and lines, and precision.py skips a corpus whose
folder is absent.

With --whole, each repository of whole.tsv (repository, commit) is also restored whole, its Python
files and notebooks only, to benchmarks/corpus/whole/<owner>__<name>/: the corpus users actually
run dpcheck on (corpus `whole` in precision.py, whose verdicts are a sample).
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent
MANIFEST = CORPUS_DIR / "manifest.tsv"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"
WHOLE = CORPUS_DIR / "whole.tsv"
WHOLE_DIR = CORPUS_DIR / "whole"
TARBALL_URL = "https://codeload.github.com/{repo}/tar.gz/{commit}"
# What a whole repository is restored with: what dpcheck reads.
SOURCE_SUFFIXES = (".py", ".ipynb")


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
    parser.add_argument("--whole", action="store_true", help="also restore the whole repositories of whole.tsv")
    args = parser.parse_args(argv)
    whole_missing = restore_whole(args.mirrors, args.check) if args.whole else 0
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
    return 1 if still_missing or whole_missing else 0


def whole_rows() -> list[dict[str, str]]:
    with WHOLE.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def whole_folder(repo: str) -> Path:
    return WHOLE_DIR / repo.replace("/", "__")


def restore_whole(mirrors: Path | None, check: bool) -> int:
    """Restore each repository of whole.tsv that is missing; the number still missing."""
    missing = 0
    for row in whole_rows():
        target = whole_folder(row["repo"])
        if target.is_dir():
            continue
        if check:
            print(f"missing: {target.relative_to(CORPUS_DIR)}")
            missing += 1
            continue
        archive = whole_from_mirror(mirrors, row) if mirrors else whole_from_github(row)
        if archive is None:
            missing += 1
            continue
        # Unpacked beside the target and renamed: a restore cut short never looks complete.
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        count = unpack_sources(archive, partial, strip=0 if mirrors else 1)
        partial.rename(target)
        print(f"restored: {target.relative_to(CORPUS_DIR)} ({count} files)")
    return missing


def whole_from_mirror(mirrors: Path, row: dict[str, str]) -> tarfile.TarFile | None:
    """The repository's Python files and notebooks at its commit, from a local clone, as a tar.
    Read blob by blob: a mirror may lack its largest files (images, data), which `git archive`
    would stop at."""
    clone = mirrors / row["repo"].replace("/", "+") / "repo"
    git = ["git", f"--git-dir={clone / '.git' if (clone / '.git').is_dir() else clone}"]
    listed = subprocess.run([*git, "ls-tree", "-r", "-z", row["commit"]], capture_output=True)
    if listed.returncode != 0:
        print(f"failed: {row['repo']}: {listed.stderr.decode(errors='replace').strip()}", file=sys.stderr)
        return None
    blobs = []
    for entry in listed.stdout.decode(errors="surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        mode, kind, sha = (meta.split() + ["", "", ""])[:3]
        if kind == "blob" and mode != "120000" and path.endswith(SOURCE_SUFFIXES):
            blobs.append((path, sha))
    read = subprocess.run([*git, "cat-file", "--batch"], input="".join(f"{sha}\n" for _, sha in blobs).encode(),
                          capture_output=True)
    out, at = read.stdout, 0
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w") as archive:
        for path, _ in blobs:
            header_end = out.index(b"\n", at)
            header = out[at:header_end].split()
            at = header_end + 1
            if len(header) < 3 or header[1] != b"blob":
                print(f"absent from the mirror: {row['repo']}/{path}", file=sys.stderr)
                continue
            size = int(header[2])
            info = tarfile.TarInfo(path.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
            info.size = size
            archive.addfile(info, io.BytesIO(out[at:at + size]))
            at += size + 1
    packed.seek(0)
    return tarfile.open(fileobj=packed)


def whole_from_github(row: dict[str, str]) -> tarfile.TarFile | None:
    url = TARBALL_URL.format(**row)
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return tarfile.open(fileobj=io.BytesIO(response.read()), mode="r:gz")
    except (OSError, tarfile.TarError) as error:
        print(f"failed: {row['repo']}: {url}: {error}", file=sys.stderr)
        return None


def unpack_sources(archive: tarfile.TarFile, folder: Path, strip: int) -> int:
    """Write the archive's regular Python files and notebooks under ``folder`` (less ``strip``
    leading path parts: GitHub's tarballs hold one top folder); never outside it."""
    count = 0
    folder.mkdir(parents=True)
    for member in archive:
        parts = Path(member.name).parts[strip:]
        if not member.isfile() or not parts or not member.name.endswith(SOURCE_SUFFIXES) \
                or Path(member.name).is_absolute() or ".." in parts:
            continue
        target = folder.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(archive.extractfile(member).read())
        count += 1
    return count


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
