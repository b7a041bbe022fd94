"""Fetch the library "zoos" the precision benchmark scans, at pinned versions.

    python benchmarks/zoos.py            # download every zoo (skips those already unpacked)
    python benchmarks/zoos.py timm       # one zoo

Each wheel is fetched with `pip download --no-deps` and its `.py` files are unpacked under
benchmarks/corpora/<wheel>/ (git-ignored), the layout benchmarks/run.py uses. The versions
are pinned in ZOO_VERSIONS so that verdicts.tsv keeps matching line numbers; change them
together with the verdicts.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPORA = HERE / "corpora"

# Pinned releases: the newest that pip resolves here on 2026-11-26 (torchvision 0.29.2 exists but
# the machine's pip constraints cap it at 0.29.1).
ZOO_VERSIONS = {
    "timm": "1.0.31",
    "torchvision": "0.29.1",
    "transformers": "5.24.0",
    "diffusers": "0.42.1",
}
# zoo name (the `corpus` column of verdicts.tsv) -> (wheel, folder scanned inside the unpacked wheel)
ZOOS = {
    "timm": ("timm", "timm"),
    "torchvision": ("torchvision", "torchvision"),
    "transformers": ("transformers", "transformers/models"),
    "diffusers": ("diffusers", "diffusers/models"),
}


def _marker(wheel: str) -> Path:
    return CORPORA / wheel / ".version"


def fetch(zoo: str) -> Path:
    """Unpack the pinned wheel of `zoo` (once) and return the folder to scan."""
    wheel_name, inner = ZOOS[zoo]
    version = ZOO_VERSIONS[wheel_name]
    target = CORPORA / wheel_name
    marker = _marker(wheel_name)
    if not (marker.exists() and marker.read_text().strip() == version):
        if target.exists():
            import shutil
            shutil.rmtree(target)
        CORPORA.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp,
                            f"{wheel_name}=={version}"], check=True)
            wheel = next(Path(tmp).glob("*.whl"))
            with zipfile.ZipFile(wheel) as zf:
                for member in zf.namelist():
                    if member.endswith(".py"):
                        zf.extract(member, target)
        marker.write_text(version + "\n")
    return target / inner


def available(zoo: str) -> Path | None:
    """The folder to scan if the pinned zoo is already unpacked, else None (no download)."""
    wheel_name, inner = ZOOS[zoo]
    marker = _marker(wheel_name)
    if marker.exists() and marker.read_text().strip() == ZOO_VERSIONS[wheel_name]:
        return target if (target := CORPORA / wheel_name / inner).exists() else None
    return None


def main(argv: list[str]) -> int:
    names = argv or list(ZOOS)
    for name in names:
        if name not in ZOOS:
            print(f"unknown zoo {name!r}; choose from {', '.join(ZOOS)}", file=sys.stderr)
            return 2
        path = fetch(name)
        files = sum(1 for _ in path.rglob("*.py"))
        print(f"{name:<13} {ZOO_VERSIONS[ZOOS[name][0]]:<8} {files:5d} files  {path.relative_to(HERE)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
