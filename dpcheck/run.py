"""What `dpcheck check` does, separate from click so it is plain to call and test."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
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
    diff: bool = False  # show the fixes as a unified diff, write nothing (implies fix-only)
    fix_only: bool = False  # apply fixes, report nothing that remains
    show_fixes: bool = False
    exit_non_zero_on_fix: bool = False
    add_noqa: bool = False
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

    if options.add_noqa and not reading_stdin:
        return _add_noqa(findings)
    fixing = options.fix or options.fix_only or options.diff
    outcome = None
    if fixing and not reading_stdin:
        outcome = _apply_fixes(findings, options, codes, run)
        findings = outcome.findings
        if options.diff or options.fix_only:
            return _fix_only_exit(outcome, options)
    elif settings.output_format in _FORMATS_WITH_EDITS:
        findings = _materialise_fixes(findings, codes)
    if options.confirm:
        findings = _confirm(findings + run.suppressed, files, settings, options)

    from dpcheck import report as reporting
    from dpcheck.registry import rule_infos
    document = Report(findings, rule_infos(), _repo_root(settings.root), codes,
                      unsafe_fixes=options.unsafe_fixes)
    reporting.write(document, settings.output_format, sys.stdout, options.statistics, options.quiet)

    if run.internal_error or any(f.code == INTERNAL_ERROR for f in findings):
        return EXIT_ERROR
    if findings and not options.exit_zero:
        return EXIT_FINDINGS
    if outcome is not None and outcome.fixed_count and options.exit_non_zero_on_fix:
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
    if not options.no_cache and not (options.fix or options.fix_only or options.diff or options.add_noqa):
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


# Formats that print each fix's edits: only these make offered fixes concrete (libcst).
_FORMATS_WITH_EDITS = frozenset({"json", "json-lines", "sarif"})


def _rule_instances(codes: list[str]) -> dict:
    from dpcheck.registry import rules_by_code

    table = rules_by_code()
    return {code: table[code]() for code in codes if code in table}


def _materialise_fixes(findings: list[Finding], codes: list[str]) -> list[Finding]:
    """Turn offered fixes into edits, parsing with libcst only the files that have one."""
    from dpcheck.fixes import cst as cstfix
    from dpcheck.fixes import writer

    rules = _rule_instances(codes)
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.filename, []).append(f)
    out: list[Finding] = []
    for filename, group in by_file.items():
        if not any(f.fix is not None and not f.fix.edits for f in group) or filename == "-":
            out.extend(group)
            continue
        try:
            source = writer.read(Path(filename)).text
        except (OSError, UnicodeDecodeError, SyntaxError, LookupError):
            out.extend(replace(f, fix=None) if f.fix is not None and not f.fix.edits else f for f in group)
            continue
        out.extend(cstfix.materialise(source, group, rules))
    return out


def _apply_fixes(findings: list[Finding], options: CheckOptions, codes: list[str], run):
    from dpcheck import engine
    from dpcheck.fixes import fix_files

    def reanalyse(filename: str, text: str) -> list[Finding]:
        kept, _ = run.settle_file(filename, engine.check_stdin(text, filename, codes).findings)
        return [f for f in kept if f.code in codes]

    outcome = fix_files(findings, _rule_instances(codes), options.unsafe_fixes, not options.diff, reanalyse)
    for filename, reason in sorted(outcome.problems.items()):
        click.echo(f"warning: {filename}: not fixed: {reason}", err=True)
    if options.diff:
        for filename in sorted(outcome.diffs):
            sys.stdout.write(outcome.diffs[filename])
    if options.show_fixes and not options.diff:
        _show_fixes(outcome)
    count = outcome.fixed_count
    if count:
        verb = "Would fix" if options.diff else "Fixed"
        click.echo(f"{verb} {count} finding{'s' if count != 1 else ''}.", err=True)
    return outcome


def _show_fixes(outcome) -> None:
    """Like ruff's --show-fixes: each file with the fixes applied, counted per code."""
    from collections import Counter

    if not outcome.fixed:
        return
    sys.stdout.write(f"Fixed {outcome.fixed_count} finding{'s' if outcome.fixed_count != 1 else ''}:\n")
    for filename in sorted(outcome.fixed):
        sys.stdout.write(f"- {filename}:\n")
        counts = Counter((f.code, f.fix.message) for f in outcome.fixed[filename])
        for (code, message), n in sorted(counts.items()):
            sys.stdout.write(f"    {n} \u00d7 {code} ({message})\n")
    sys.stdout.write("\n")


def _fix_only_exit(outcome, options: CheckOptions) -> int:
    if options.diff:
        return EXIT_FINDINGS if outcome.diffs and not options.exit_zero else EXIT_CLEAN
    if outcome.fixed_count and options.exit_non_zero_on_fix:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _add_noqa(findings: list[Finding]) -> int:
    from dpcheck.fixes.noqa import add_noqa

    added, problems = add_noqa(findings)
    for filename, reason in sorted(problems.items()):
        click.echo(f"warning: {filename}: no noqa added: {reason}", err=True)
    click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.", err=True)
    return EXIT_CLEAN


def _repo_root(start: Path) -> Path:
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return start
