"""Settings from `[tool.dpcheck]` in the nearest pyproject.toml (or a dpcheck.toml), then the CLI.

As in ruff: a `dpcheck.toml` wins over a `pyproject.toml` in the same folder, a
pyproject.toml without a `[tool.dpcheck]` table is skipped, and paths in the file are
relative to the folder that holds it. An unknown key or rule code is an error.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path

from dpcheck.constants import BACKENDS, OUTPUT_FORMATS
from dpcheck.discovery import DEFAULT_EXCLUDE
from dpcheck.registry import SelectionError, check_selector

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude")
KNOWN_KEYS = frozenset(_LIST_KEYS + ("per-file-ignores", "output-format", "force-exclude",
                                    "respect-gitignore", "cache-dir", "examples", "timeout",
                                    "devices", "backend"))


class ConfigError(ValueError):
    pass


@dataclass
class Settings:
    root: Path
    config_file: Path | None = None
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool = False
    respect_gitignore: bool = True
    output_format: str = "full"
    cache_dir: Path | None = None
    # Used by --confirm: a file of dpcheck_example functions, the per-file time limit,
    # the device count and the backend.
    examples: Path | None = None
    timeout: float = 60.0
    devices: int | None = None
    backend: str = "auto"

    @property
    def all_excludes(self) -> list[str]:
        return [*self.exclude, *self.extend_exclude]

    def ignored_for(self, path: Path) -> list[str]:
        """Codes `per-file-ignores` turns off for ``path``."""
        if not self.per_file_ignores:
            return []
        try:
            rel = path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            rel = path.as_posix()
        codes: list[str] = []
        for pattern, selectors in self.per_file_ignores.items():
            pattern = pattern.removeprefix("./")
            if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(path.name, pattern) \
                    or fnmatch.fnmatchcase(rel, pattern.rstrip("/") + "/*"):
                codes.extend(selectors)
        return codes


def find_config(start: Path) -> Path | None:
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in [folder, *folder.parents]:
        own = candidate / "dpcheck.toml"
        if own.is_file():
            return own
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            try:
                data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{pyproject}: cannot parse: {exc}") from None
            if "dpcheck" in data.get("tool", {}):
                return pyproject
    return None


def load_settings(config_file: Path | None, cwd: Path) -> Settings:
    if config_file is None:
        return Settings(root=cwd.resolve())
    try:
        data = tomllib.loads(config_file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{config_file}: cannot parse: {exc}") from None
    table = data if config_file.name == "dpcheck.toml" else data.get("tool", {}).get("dpcheck", {})
    # dpcheck.toml may also nest everything under [tool.dpcheck] or be flat.
    if config_file.name == "dpcheck.toml" and "tool" in table:
        table = table["tool"].get("dpcheck", {})
    settings = Settings(root=config_file.parent.resolve(), config_file=config_file)
    apply_table(settings, table, str(config_file))
    return settings


def apply_table(settings: Settings, table: dict, where: str) -> None:
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) in [tool.dpcheck]: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    for key in _LIST_KEYS:
        if key in table:
            value = table[key]
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ConfigError(f"{where}: `{key}` must be a list of strings")
    try:
        if "select" in table:
            settings.select = [check_selector(s, where) for s in table["select"]]
        if "extend-select" in table:
            settings.extend_select = [check_selector(s, where) for s in table["extend-select"]]
        if "ignore" in table:
            settings.ignore = [check_selector(s, where) for s in table["ignore"]]
        pfi = table.get("per-file-ignores", {})
        if not isinstance(pfi, dict) or not all(isinstance(v, list) for v in pfi.values()):
            raise ConfigError(f"{where}: `per-file-ignores` must map globs to lists of codes")
        settings.per_file_ignores = {k: [check_selector(c, where) for c in v] for k, v in pfi.items()}
    except SelectionError as exc:
        raise ConfigError(str(exc)) from None
    if "exclude" in table:
        settings.exclude = list(table["exclude"])
    if "extend-exclude" in table:
        settings.extend_exclude = list(table["extend-exclude"])
    if "output-format" in table:
        fmt = table["output-format"]
        if fmt not in OUTPUT_FORMATS:
            raise ConfigError(f"{where}: `output-format` must be one of {', '.join(OUTPUT_FORMATS)}")
        settings.output_format = fmt
    for key, attr in (("force-exclude", "force_exclude"), ("respect-gitignore", "respect_gitignore")):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"{where}: `{key}` must be true or false")
            setattr(settings, attr, table[key])
    if "cache-dir" in table:
        settings.cache_dir = (settings.root / table["cache-dir"]).resolve()
    if "examples" in table:
        settings.examples = (settings.root / table["examples"]).resolve()
    if "timeout" in table:
        if not isinstance(table["timeout"], (int, float)) or table["timeout"] <= 0:
            raise ConfigError(f"{where}: `timeout` must be a positive number of seconds")
        settings.timeout = float(table["timeout"])
    if "devices" in table:
        if not isinstance(table["devices"], int) or table["devices"] < 2:
            raise ConfigError(f"{where}: `devices` must be an integer of at least 2")
        settings.devices = table["devices"]
    if "backend" in table:
        if table["backend"] not in BACKENDS:
            raise ConfigError(f"{where}: `backend` must be auto, cuda or emulated")
        settings.backend = table["backend"]
