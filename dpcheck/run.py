"""What `dpcheck check` does, separate from click so it is plain to call and test."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

from dpcheck.config import ConfigError, Settings, find_config, load_settings
from dpcheck.constants import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, INTERNAL_ERROR
from dpcheck.findings import Finding, Report
from dpcheck.registry import SelectionError, check_selector, select_rules


@dataclass
class CheckOptions:
    paths: list[Path] = field(default_factory=list)
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool | None = None
    respect_gitignore: bool | None = None
    output_format: str | None = None
    config_path: Path | None = None
    isolated: bool = False
    stdin_filename: str | None = None
    exit_zero: bool = False
    statistics: bool = False
    quiet: bool = False
    jobs: int | None = None
    no_cache: bool = False
    cache_dir: Path | None = None
    fix: bool = False
    unsafe_fixes: bool = False
    confirm: bool = False
    backend: str | None = None
    devices: int | None = None
    timeout: float | None = None


def _error(message: str) -> int:
    click.echo(f"error: {message}", err=True)
    return EXIT_ERROR


def resolve_settings(options: CheckOptions) -> Settings:
    cwd = Path.cwd()
    if options.isolated:
        settings = Settings(root=cwd.resolve())
    else:
        config = options.config_path
        if config is None:
            first = next((p for p in options.paths if str(p) != "-"), None)
            config = find_config(cwd if first is None or not first.exists() else first)
        settings = load_settings(config, cwd)
    # Command-line options override the file, as in ruff.
    try:
        if options.select is not None:
            settings.select = [check_selector(s, "--select") for s in options.select]
        settings.extend_select += [check_selector(s, "--extend-select") for s in options.extend_select]
        settings.ignore += [check_selector(s, "--ignore") for s in options.ignore]
    except SelectionError as exc:
        raise ConfigError(str(exc)) from None
    if options.exclude is not None:
        settings.exclude = options.exclude
    settings.extend_exclude += options.extend_exclude
    if options.force_exclude is not None:
        settings.force_exclude = options.force_exclude
    if options.respect_gitignore is not None:
        settings.respect_gitignore = options.respect_gitignore
    if options.output_format:
        settings.output_format = options.output_format
    if options.cache_dir is not None:
        settings.cache_dir = options.cache_dir.resolve()
    if options.timeout is not None:
        settings.timeout = options.timeout
    if options.devices is not None:
        settings.devices = options.devices
    if options.backend is not None:
        settings.backend = options.backend
    return settings


def run_check(options: CheckOptions) -> int:
    try:
        settings = resolve_settings(options)
    except ConfigError as exc:
        return _error(str(exc))
    rules = select_rules(settings.select, settings.extend_select, settings.ignore)
    codes = [r.code for r in rules]
    paths = options.paths or [Path(".")]
    reading_stdin = any(str(p) == "-" for p in paths)
    if reading_stdin and len(paths) > 1:
        return _error("`-` (stdin) cannot be combined with other paths")
    missing = [p for p in paths if str(p) != "-" and not p.exists()]
    for p in missing:
        click.echo(f"error: {p}: No such file or directory", err=True)
    if missing:
        return EXIT_ERROR
    if options.confirm and not _torch_available():
        return _error("--confirm imports your models and needs torch: pip install 'dpcheck[confirm]'")

    results, files, cache = _analyze(options, settings, codes, paths, reading_stdin)
    from dpcheck import engine
    run = engine.settle(results, lambda name: settings.ignored_for(Path(name)), cache)
    if cache is not None:
        cache.save()
    findings = [f for f in run.findings if f.code in codes]

    if options.fix and not reading_stdin:
        findings = _apply_fixes(findings, options.unsafe_fixes)
    if options.confirm:
        findings = _confirm(findings + run.suppressed, files, settings, options)

    from dpcheck import report as reporting
    from dpcheck.registry import rule_infos
    document = Report(findings, rule_infos(), _repo_root(settings.root), codes)
    reporting.write(document, settings.output_format, sys.stdout, options.statistics, options.quiet)

    if run.internal_error or any(f.code == INTERNAL_ERROR for f in findings):
        return EXIT_ERROR
    if findings and not options.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _analyze(options: CheckOptions, settings: Settings, codes: list[str], paths: list[Path],
             reading_stdin: bool):
    """(file results, the files checked, the cache or None): from stdin or from disk."""
    from dpcheck import engine

    if reading_stdin:
        display = options.stdin_filename or "-"
        if settings.force_exclude and options.stdin_filename and _excluded(Path(display), settings):
            return [], [], None
        text = sys.stdin.buffer.read().decode("utf-8", errors="surrogateescape")
        return [engine.check_stdin(text, display, codes)], [], None
    from dpcheck.discovery import discover

    files = list(discover(paths, settings.root, settings.all_excludes, settings.force_exclude,
                          settings.respect_gitignore))
    cache = None
    if not options.no_cache and not options.fix:
        from dpcheck.cache import Cache
        cache = Cache.open(settings.cache_dir or settings.root / ".dpcheck_cache", codes)
    results, _hits = engine.analyze_files(files, codes, options.jobs, cache)
    return results, files, cache


def _confirm(findings: list[Finding], files: list[Path], settings: Settings, options: CheckOptions) -> list[Finding]:
    """Run the models; keep selected dynamic findings and drop the noqa-suppressed ones."""
    from dpcheck.confirm import confirm_findings

    dynamic = {r.code for r in select_rules(settings.select, settings.extend_select, settings.ignore,
                                            include_dynamic=True) if r.kind == "dynamic"}
    static = {r.code for r in select_rules(settings.select, settings.extend_select, settings.ignore)}
    return [f for f in confirm_findings(findings, files, settings, options)
            if not f.suppressed and (f.code in static or f.code in dynamic)]


def _excluded(path: Path, settings: Settings) -> bool:
    from dpcheck.discovery import discover

    return not list(discover([path], settings.root, settings.all_excludes, True, settings.respect_gitignore))


def _apply_fixes(findings: list[Finding], unsafe: bool) -> list[Finding]:
    from dpcheck.fix import applicable, fix_file

    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        if applicable(f, unsafe):
            by_file.setdefault(f.filename, []).append(f)
    fixed: set[int] = set()
    for filename, group in by_file.items():
        for applied in fix_file(Path(filename), group):
            fixed.add(id(applied))
    if fixed:
        click.echo(f"Fixed {len(fixed)} finding{'s' if len(fixed) != 1 else ''}.", err=True)
    return [f for f in findings if id(f) not in fixed]


def _repo_root(start: Path) -> Path:
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return start
