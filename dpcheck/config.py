"""Settings per file, as ruff resolves them: the closest configuration file decides.

For each file, the closest folder (the file's own, then its parents) holding a
`dpcheck.toml`, a `.dpcheck.toml` or a `pyproject.toml` with a `[tool.dpcheck]` table
gives its settings, so a file gives the same results wherever dpcheck is started. In one
folder `.dpcheck.toml` wins over `dpcheck.toml`, which wins over `pyproject.toml`, as in
ruff. A file with no configuration above it gets the settings of the configuration
closest to the working folder (or the defaults). `extend = "../base.toml"` inherits
another file's settings (relative to the file that says it); the extending file's keys
are applied on top. Patterns (`exclude`, `per-file-ignores`) are relative to the folder
of the closest configuration file (the project root); `cache-dir` and `examples` to the
file that names them. The command line applies on top of every file; `--config FILE`
uses one file for everything and `--isolated` none. An unknown key or rule code is an
error (exit 2).
"""

from __future__ import annotations

import fnmatch
import os
import sys
from functools import cached_property
from pathlib import Path
from typing import Callable

from dpcheck.constants import BACKENDS, FAIL_LEVELS, OUTPUT_FORMATS
from dpcheck.discovery import DEFAULT_EXCLUDE, Excluder
from dpcheck.record import field, record
from dpcheck.registry import SelectionError, check_selector, select_rules

# The names a configuration file may have, strongest first within one folder.
CONFIG_NAMES = (".dpcheck.toml", "dpcheck.toml", "pyproject.toml")

_LIST_KEYS = ("select", "ignore", "extend-select", "extend-ignore", "exclude", "extend-exclude")
_MAPPING_KEYS = ("per-file-ignores", "extend-per-file-ignores")
KNOWN_KEYS = frozenset(_LIST_KEYS + _MAPPING_KEYS + (
    "extend", "output-format", "force-exclude", "respect-gitignore", "cache-dir", "examples",
    "timeout", "devices", "backend", "fail-level"))


class ConfigError(ValueError):
    pass


@record(eq=False)
class Settings:
    """The resolved settings of one configuration file (plus the command line).

    Files sharing a configuration file share one Settings object, so it is also the key
    by which files are grouped for analysis."""

    root: Path
    config_file: Path | None = None
    # Every file this one inherits from through `extend`, base first.
    extended: list[Path] = field(default_factory=list)
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
    # The least severe finding that fails the run (exit 1): info is advice and never does by default.
    fail_level: str = "warning"

    @property
    def all_excludes(self) -> list[str]:
        return [*self.exclude, *self.extend_exclude]

    @cached_property
    def excluder(self) -> Excluder:
        return Excluder(self.root, self.all_excludes)

    @cached_property
    def codes(self) -> tuple[str, ...]:
        """The static rules this selection runs, in code order."""
        return tuple(r.code for r in select_rules(self.select, self.extend_select, self.ignore))

    @cached_property
    def dynamic_codes(self) -> frozenset[str]:
        return frozenset(r.code for r in select_rules(self.select, self.extend_select, self.ignore,
                                                      include_dynamic=True) if r.kind == "dynamic")

    @property
    def cache_folder(self) -> Path:
        return self.cache_dir or self.root / ".dpcheck_cache"

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

    def describe(self) -> str:
        """What `--show-settings` prints: every resolved value, one per line."""
        def show(value) -> str:
            if value is None:
                return "none"
            if isinstance(value, bool):
                return str(value).lower()
            if isinstance(value, (list, tuple)):
                return "[" + ", ".join(str(v) for v in value) + "]"
            return str(value)

        lines = [f"config file: {self.config_file or 'none (defaults)'}"]
        if self.extended:
            lines.append(f"extends: {show(self.extended)}")
        lines += [
            f"project root: {self.root}",
            f"rules ({len(self.codes)}): {show(self.codes)}",
            f"select: {show(self.select if self.select is not None else '(default)')}",
            f"extend-select: {show(self.extend_select)}",
            f"ignore: {show(self.ignore)}",
            "per-file-ignores:" + ("" if self.per_file_ignores else " none"),
            *(f"  {glob}: {show(codes)}" for glob, codes in self.per_file_ignores.items()),
            f"exclude: {show(self.exclude)}",
            f"extend-exclude: {show(self.extend_exclude)}",
            f"force-exclude: {show(self.force_exclude)}",
            f"respect-gitignore: {show(self.respect_gitignore)}",
            f"output-format: {self.output_format}",
            f"cache-dir: {self.cache_folder}",
            f"examples: {show(self.examples)}",
            f"timeout: {self.timeout:g}",
            f"devices: {show(self.devices)}",
            f"backend: {self.backend}",
            f"fail-level: {self.fail_level}",
        ]
        return "\n".join(lines)


def read_toml(path: Path) -> dict:
    return parse_toml(path, _read_text(path))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot parse: {exc}") from None


def parse_toml(path: Path, text: str) -> dict:
    # Imported here: a file with no configuration around it (an editor, pre-commit on a
    # project without one) never pays for the TOML parser.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: cannot parse: {exc}") from None


def _pyproject_configures_dpcheck(path: Path) -> bool:
    """Whether a pyproject.toml has a [tool.dpcheck] table. One whose text never says
    `dpcheck` cannot have one (only a key spelt with unicode escapes could hide the word),
    and is not parsed: the TOML parser, with the typing module it imports, costs 7 ms of
    a one-file run in a project whose pyproject.toml configures other tools only."""
    text = _read_text(path)
    return "dpcheck" in text and dpcheck_table(path, parse_toml(path, text)) is not None


def dpcheck_table(path: Path, data: dict) -> dict | None:
    """The dpcheck settings in a parsed file, or None when a pyproject.toml has none.

    dpcheck.toml may be flat or nest everything under [tool.dpcheck]."""
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("dpcheck") if isinstance(data.get("tool"), dict) else None
    elif isinstance(data.get("tool"), dict) and "dpcheck" in data["tool"]:
        table = data["tool"]["dpcheck"]
    else:
        table = data
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.dpcheck] must be a table")
    return table


def config_in(folder: Path | str) -> Path | None:
    """The configuration file that decides for ``folder`` itself, if any."""
    for name in CONFIG_NAMES:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and (name != "pyproject.toml" or _pyproject_configures_dpcheck(Path(candidate))):
            return Path(candidate)
    return None


def find_config(start: Path) -> Path | None:
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in [folder, *folder.parents]:
        found = config_in(candidate)
        if found is not None:
            return found
    return None


def load_settings(config_file: Path | None, cwd: Path) -> Settings:
    """The settings of one file (with everything it extends), or the defaults at ``cwd``."""
    if config_file is None:
        return Settings(root=cwd.resolve())
    config_file = config_file.resolve()
    settings = Settings(root=config_file.parent, config_file=config_file)
    for path, table in _extend_chain(config_file):
        apply_table(settings, table, str(path), path.parent)
        if path != config_file:
            settings.extended.append(path)
    return settings


def _extend_chain(config_file: Path) -> list[tuple[Path, dict]]:
    """(file, table) for ``config_file`` and everything it extends, base first."""
    chain: list[tuple[Path, dict]] = []
    path = config_file
    while True:
        if any(path == seen for seen, _ in chain):
            cycle = " -> ".join(str(p) for p, _ in chain) + f" -> {path}"
            raise ConfigError(f"{config_file}: `extend` forms a cycle: {cycle}")
        table = dpcheck_table(path, read_toml(path))
        if table is None:
            raise ConfigError(f"{path}: no [tool.dpcheck] table (named by `extend`)")
        chain.append((path, table))
        base = table.get("extend")
        if base is None:
            return list(reversed(chain))
        if not isinstance(base, str):
            raise ConfigError(f"{path}: `extend` must be a path")
        target = (path.parent / os.path.expandvars(os.path.expanduser(base))).resolve()
        if not target.is_file():
            raise ConfigError(f"{path}: `extend` names {target}, which does not exist")
        path = target


def _selectors(value, key: str, where: str) -> list[str]:
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    try:
        return [check_selector(s, f"`{key}` of {where}") for s in value]
    except SelectionError as exc:
        raise ConfigError(str(exc)) from None


def _glob_map(value, key: str, where: str) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: `{key}` must map globs to lists of codes")
    return {str(glob): _selectors(codes, f"{key}.{glob}", where) for glob, codes in value.items()}


def apply_table(settings: Settings, table: dict, where: str, base: Path | None = None) -> None:
    """Apply one layer (a configuration file, or the command line) on top of ``settings``.

    As in ruff, a layer that sets `select` starts the selection afresh: the ignores and
    extra selections of the layers below it no longer apply."""
    base = base or settings.root
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) in [tool.dpcheck]: {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    for key in ("exclude", "extend-exclude"):
        if key in table and not (isinstance(table[key], list) and all(isinstance(v, str) for v in table[key])):
            raise ConfigError(f"{where}: `{key}` must be a list of strings")
    if "select" in table:
        settings.select = _selectors(table["select"], "select", where)
        settings.extend_select, settings.ignore = [], []
    settings.extend_select += _selectors(table.get("extend-select", []), "extend-select", where)
    settings.ignore += _selectors(table.get("ignore", []), "ignore", where)
    settings.ignore += _selectors(table.get("extend-ignore", []), "extend-ignore", where)
    if "per-file-ignores" in table:
        settings.per_file_ignores = _glob_map(table["per-file-ignores"], "per-file-ignores", where)
    for glob, codes in _glob_map(table.get("extend-per-file-ignores", {}), "extend-per-file-ignores",
                                 where).items():
        settings.per_file_ignores[glob] = [*settings.per_file_ignores.get(glob, []), *codes]
    if "exclude" in table:
        settings.exclude = list(table["exclude"])
    settings.extend_exclude += list(table.get("extend-exclude", []))
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
    for key, attr in (("cache-dir", "cache_dir"), ("examples", "examples")):
        if key in table:
            if not isinstance(table[key], (str, Path)):
                raise ConfigError(f"{where}: `{key}` must be a path")
            setattr(settings, attr, (base / table[key]).resolve())
    if "timeout" in table:
        if isinstance(table["timeout"], bool) or not isinstance(table["timeout"], (int, float)) \
                or table["timeout"] <= 0:
            raise ConfigError(f"{where}: `timeout` must be a positive number of seconds")
        settings.timeout = float(table["timeout"])
    if "devices" in table:
        if isinstance(table["devices"], bool) or not isinstance(table["devices"], int) or table["devices"] < 2:
            raise ConfigError(f"{where}: `devices` must be an integer of at least 2")
        settings.devices = table["devices"]
    if "backend" in table:
        if table["backend"] not in BACKENDS:
            raise ConfigError(f"{where}: `backend` must be auto, cuda or emulated")
        settings.backend = table["backend"]
    if "fail-level" in table:
        if table["fail-level"] not in FAIL_LEVELS:
            raise ConfigError(f"{where}: `fail-level` must be one of {', '.join(FAIL_LEVELS)}")
        settings.fail_level = table["fail-level"]


def parse_per_file_ignores(values: list[str], option: str) -> dict[str, list[str]]:
    """`--per-file-ignores "tests/*.py:DP1,DP30"` (codes or prefixes) (repeatable) as a config mapping."""
    mapping: dict[str, list[str]] = {}
    for value in values:
        glob, sep, codes = value.rpartition(":")
        if not sep or not glob.strip():
            raise ConfigError(f"{option} expects GLOB:CODES, got `{value}`")
        mapping.setdefault(glob.strip(), []).extend(c.strip() for c in codes.split(",") if c.strip())
    return mapping


class Resolver:
    """Settings for each file and folder, from the closest configuration file.

    ``overrides`` is the command line as one more configuration layer, applied on top of
    every file's settings. Each configuration file is read once."""

    def __init__(self, cwd: Path, overrides: dict | None = None, config_file: Path | None = None,
                 isolated: bool = False) -> None:
        self.cwd = cwd.resolve()
        self.overrides = overrides or {}
        self._by_config: dict[Path | None, Settings] = {}
        # Keyed by a folder's absolute path as a string: a lookup per file and per walked
        # folder, and most end here without building a Path.
        self._by_folder: dict[str, Settings] = {}
        self.fixed: Settings | None = None
        if isolated:
            self.fixed = self._settings(None)
        elif config_file is not None:
            self.fixed = self._settings(config_file.resolve())
        # Files with no configuration above them get the working folder's settings.
        self.default = self.fixed or self._settings(find_config(self.cwd))

    def _settings(self, config_file: Path | None) -> Settings:
        settings = self._by_config.get(config_file)
        if settings is None:
            settings = load_settings(config_file, self.cwd)
            if self.overrides:
                apply_table(settings, self.overrides, "the command line", self.cwd)
            self._by_config[config_file] = settings
        return settings

    def for_folder(self, folder: Path | str) -> Settings:
        if self.fixed is not None:
            return self.fixed
        return self._for_absolute_folder(os.path.abspath(folder))

    def _for_absolute_folder(self, folder: str) -> Settings:
        """Settings for ``folder`` (absolute and normalised): the closest folder at or above it
        with a configuration file decides. Every folder looked at remembers the answer."""
        found = self._by_folder.get(folder)
        if found is not None:
            return found
        walked: list[str] = []
        candidate = folder
        while True:
            found = self._by_folder.get(candidate)
            if found is not None:
                break
            walked.append(candidate)
            config = config_in(candidate)
            if config is not None:
                found = self._settings(config.resolve())
                break
            parent = os.path.dirname(candidate)
            if parent == candidate:
                break
            candidate = parent
        found = found or self.default
        for candidate in walked:
            self._by_folder[candidate] = found
        return found

    def for_file(self, path: Path | str) -> Settings:
        if self.fixed is not None:
            return self.fixed
        return self._for_absolute_folder(os.path.dirname(os.path.abspath(path)))

    def all_settings(self) -> list[Settings]:
        return list(dict.fromkeys(self._by_config.values()))

    @property
    def excluder_for(self) -> Callable[[Path | str], Excluder]:
        return lambda folder: self.for_folder(folder).excluder
