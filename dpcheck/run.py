"""What `dpcheck check` does, separate from the command line's parsing so it is plain to call and test."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

from dpcheck import startup
from dpcheck.config import ConfigError, Resolver, Settings, parse_per_file_ignores
from dpcheck.constants import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, INTERNAL_ERROR
from dpcheck.findings import Finding, Report, Severity
from dpcheck.record import field, record

# Said on stderr, as ruff does: "All checks passed!" alone would read as a clean result.
NO_FILES_WARNING = "warning: No Python files found under the given path(s)"
# Formats whose text may be coloured (the others are read by programs).
COLOURABLE_FORMATS = ("full", "concise")


@record
class CheckOptions:
    """What `dpcheck check` was asked to do: its command line, before any configuration file."""

    paths: list[Path] = field(default_factory=list)
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    extend_ignore: list[str] = field(default_factory=list)
    per_file_ignores: list[str] = field(default_factory=list)         # "GLOB:CODES" each
    extend_per_file_ignores: list[str] = field(default_factory=list)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool | None = None
    respect_gitignore: bool | None = None
    output_format: str | None = None
    output_file: Path | None = None
    color: str = "auto"  # auto | always | never
    config_path: Path | None = None
    isolated: bool = False
    show_settings: bool = False
    show_files: bool = False
    stdin_filename: str | None = None
    exit_zero: bool = False
    fail_level: str | None = None
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


def echo(message: str, err: bool = False) -> None:
    """One line to stdout (or stderr), flushed at once so it keeps its place among the
    streams' other writes."""
    stream = sys.stderr if err else sys.stdout
    if stream is not None:  # pythonw has no console streams
        stream.write(f"{message}\n")
        stream.flush()


def _error(message: str) -> int:
    echo(f"error: {message}", err=True)
    return EXIT_ERROR


def command_line_layer(options: CheckOptions) -> dict:
    """The command line as one more configuration layer (config-file keys), applied on
    top of every file's settings, as in ruff."""
    layer: dict = {}
    if options.select is not None:
        layer["select"] = options.select
    for key, value in (("extend-select", options.extend_select), ("ignore", options.ignore),
                       ("extend-ignore", options.extend_ignore), ("extend-exclude", options.extend_exclude)):
        if value:
            layer[key] = list(value)
    if options.exclude is not None:
        layer["exclude"] = list(options.exclude)
    if options.per_file_ignores:
        layer["per-file-ignores"] = parse_per_file_ignores(options.per_file_ignores, "--per-file-ignores")
    if options.extend_per_file_ignores:
        layer["extend-per-file-ignores"] = parse_per_file_ignores(options.extend_per_file_ignores,
                                                                  "--extend-per-file-ignores")
    for key, value in (("force-exclude", options.force_exclude), ("respect-gitignore", options.respect_gitignore),
                       ("output-format", options.output_format), ("timeout", options.timeout),
                       ("devices", options.devices), ("backend", options.backend),
                       ("fail-level", options.fail_level)):
        if value is not None:
            layer[key] = value
    if options.cache_dir is not None:
        layer["cache-dir"] = str(options.cache_dir)
    return layer


def make_resolver(options: CheckOptions) -> Resolver:
    return Resolver(Path.cwd(), command_line_layer(options), options.config_path, options.isolated)


def reads_stdin(options: CheckOptions) -> bool:
    """`-` as the path, or `--stdin-filename` with no path at all (as ruff does)."""
    return any(str(p) == "-" for p in options.paths) or (not options.paths and options.stdin_filename is not None)


def run_check(options: CheckOptions) -> int:
    try:
        resolver = make_resolver(options)
    except ConfigError as exc:
        return _error(str(exc))
    settings = resolver.default  # run-wide choices (output format, --confirm) come from here
    reading_stdin = reads_stdin(options)
    if reading_stdin and len(options.paths) > 1:
        return _error("`-` (stdin) cannot be combined with other paths")
    paths = [p for p in options.paths if str(p) != "-"] or ([] if reading_stdin else [Path(".")])
    missing = [p for p in paths if not p.exists()]
    for p in missing:
        echo(f"error: {p}: No such file or directory", err=True)
    if missing:
        return EXIT_ERROR
    if options.show_settings:
        return _show_settings(resolver, paths, options.stdin_filename)
    if options.confirm and not _torch_available():
        return _error("--confirm imports your models and needs torch: "
                      "pip install 'dpcheck[confirm] @ git+https://github.com/dpcheck/dpcheck'")
    if options.confirm and settings.backend == "cuda":
        problem = _cuda_problem(settings.devices)
        if problem:
            return _error(f"--backend cuda: {problem}; use --backend emulated (or auto, which falls back to it)")

    try:
        if options.show_files:
            for path in _discover(resolver, paths):
                echo(str(path))
            return EXIT_CLEAN
        stdin_text = sys.stdin.buffer.read().decode("utf-8", errors="surrogateescape") if reading_stdin else None
        run, files, settings_of, caches = _analyze(options, resolver, paths, stdin_text)
    except ConfigError as exc:
        return _error(str(exc))
    # Each stage after analysis is guarded: a dpcheck bug there is reported on stderr and
    # exits 2, but every result that was computed is still printed as a complete document.
    failures: list[str] = []
    for cache in caches:
        cache.save()
    findings = [f for f in run.findings if f.code in settings_of[f.filename].codes]
    # Every code some file selects, in rule order (for the report and the fixers' rules).
    from dpcheck.registry import all_rules
    selected = set().union(*(s.codes for s in settings_of.values())) if settings_of else set(settings.codes)
    codes = [r.code for r in all_rules() if r.code in selected]

    if options.add_noqa and not reading_stdin:
        return _add_noqa(findings)
    fixing = options.fix or options.fix_only or options.diff
    outcome = None
    if fixing and reading_stdin:
        return _fix_stdin(stdin_text, findings, options, codes, run, settings_of, settings)
    if fixing:
        try:
            outcome = _apply_fixes(findings, options, codes, run, lambda name: settings_of[name].codes)
        except Exception as exc:  # noqa: BLE001 - files stay as they were; their findings stay reported
            failures.append(f"--fix failed: {type(exc).__name__}: {exc}")
        else:
            findings = outcome.findings
            if options.diff or options.fix_only:
                return _fix_only_exit(outcome, options)
    elif settings.output_format in _FORMATS_WITH_EDITS:
        try:
            findings = _materialise_fixes(findings, codes, options.jobs)
        except Exception as exc:  # noqa: BLE001 - the findings stand, without their edits
            failures.append(f"making fixes concrete failed: {type(exc).__name__}: {exc}")
    if options.confirm:
        try:
            findings = _confirm(findings + run.suppressed, files, settings, settings_of, options)
        except Exception as exc:  # noqa: BLE001 - the static findings still stand
            failures.append(f"--confirm failed: {type(exc).__name__}: {exc}")

    from dpcheck.registry import rule_infos
    fail_level = Severity(settings.fail_level)
    document = Report(findings, rule_infos(), _repo_root(settings.root), codes, fail_level,
                      unsafe_fixes=options.unsafe_fixes)
    try:
        _write_report(document, settings.output_format, options, failures)
    except BrokenPipeError:
        # The reader left (`dpcheck | head`): as Python's docs advise, point stdout at
        # /dev/null so the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError as exc:
        if options.output_file is None:
            raise
        return _error(f"{options.output_file}: cannot write: {exc.strerror or exc}")
    for message in failures:
        echo(f"error: internal error (please report it): {message}", err=True)

    if failures or run.internal_error or any(f.code == INTERNAL_ERROR for f in findings):
        return EXIT_ERROR
    failing = any(Severity(f.severity).rank >= fail_level.rank for f in findings)
    if failing and not options.exit_zero:
        return EXIT_FINDINGS
    if outcome is not None and outcome.fixed_count and options.exit_non_zero_on_fix:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def use_colour(choice: str, output_format: str, out: TextIO) -> bool:
    """Colour for people only: full/concise to a terminal, unless NO_COLOR is set (auto),
    or whenever asked (always); never for JSON, SARIF or GitHub commands."""
    if output_format not in COLOURABLE_FORMATS or choice == "never":
        return False
    if choice == "always":
        return True
    return not os.environ.get("NO_COLOR") and hasattr(out, "isatty") and out.isatty()


def _write_report(document: Report, output_format: str, options: CheckOptions, failures: list[str]) -> None:
    """Render the whole document first, then write it at once: what is written is always
    complete (valid JSON or SARIF), whatever failed on the way."""
    from dpcheck import report as reporting

    if options.output_file is None:
        colour = use_colour(options.color, output_format, sys.stdout)
        _emit(reporting.render(document, output_format, options.statistics, options.quiet, colour, failures))
        return
    with open(options.output_file, "w", encoding="utf-8", newline="", errors="surrogateescape") as out:
        colour = use_colour(options.color, output_format, out)
        out.write(reporting.render(document, output_format, options.statistics, options.quiet, colour, failures))


def _emit(text: str) -> None:
    """Write to stdout. Paths that are not valid UTF-8 come back from the OS as surrogate
    escapes; they are written as the bytes they were, not as a crash."""
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:
        buffer = getattr(sys.stdout, "buffer", None)
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        if buffer is None:
            sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))
            return
        sys.stdout.flush()
        try:
            buffer.write(text.encode(encoding, "surrogateescape"))
        except UnicodeEncodeError:
            buffer.write(text.encode(encoding, "backslashreplace"))
    sys.stdout.flush()


def _show_settings(resolver: Resolver, paths: list[Path], stdin_filename: str | None) -> int:
    """`--show-settings`: the settings that apply to the first path (or the stdin filename)."""
    target = Path(stdin_filename) if stdin_filename and not paths else (paths[0] if paths else Path("."))
    try:
        settings = resolver.for_folder(target) if target.is_dir() else resolver.for_file(target)
    except ConfigError as exc:
        return _error(str(exc))
    echo(f"Resolved settings for: {os.path.abspath(target)}")
    echo(settings.describe())
    return EXIT_CLEAN


def _discover(resolver: Resolver, paths: list[Path]) -> list[Path]:
    """The files to check: each folder's entries are excluded by its closest configuration."""
    from dpcheck.discovery import discover

    settings = resolver.default
    files = list(discover(paths, settings.root, settings.all_excludes, settings.force_exclude,
                          settings.respect_gitignore, resolver.excluder_for))
    if not files:
        echo(NO_FILES_WARNING, err=True)
    return files


def _torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _cuda_problem(devices: int | None) -> str | None:
    """Why the cuda backend cannot run here, or None. Asked of a child process: importing
    torch (and initialising CUDA) in this process would cost seconds on every run."""
    import subprocess

    needed = max(devices or 2, 2)
    probe = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                              check=False)
        found = int(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return f"cannot count CUDA devices (is torch built with CUDA?); it needs at least {needed}"
    if found < needed:
        return f"it needs at least {needed} CUDA devices and this machine has {found}"
    return None


def _analyze(options: CheckOptions, resolver: Resolver, paths: list[Path], stdin_text: str | None):
    """(the settled run, the files checked, each result's settings by filename, the caches
    used): from stdin (``stdin_text``) or from disk. Each file runs the rules its own settings
    select. Through one cache, a run whose inputs are all unchanged is read back settled
    (``engine.settled_from_cache``), and a run settled anew is kept for the next one."""
    from dpcheck import engine

    if stdin_text is not None:
        display = _stdin_name(options)
        settings = resolver.for_file(Path(display)) if options.stdin_filename else resolver.default
        if settings.force_exclude and options.stdin_filename and _excluded(Path(display), resolver):
            return engine.settle([]), [], {}, []
        startup.resume()
        result = engine.check_stdin(stdin_text, display, settings.codes)
        return engine.settle([result], lambda name: settings.ignored_for(Path(name))), [], {display: settings}, []

    if options.no_cache or options.fix or options.fix_only or options.diff or options.add_noqa:
        return _analyze_discovered(options, resolver, paths)
    files = _discover(resolver, paths)
    settings_of = {str(f): resolver.for_file(f) for f in files}

    def per_file_ignores(name: str) -> list[str]:
        return settings_of[name].ignored_for(Path(name))

    caches: dict[tuple, object] = {}
    selections: list[engine.Selection] = []
    index: dict[tuple, int] = {}
    choice: list[int] = []
    for f in files:
        settings = settings_of[str(f)]
        cache = None
        if not options.no_cache and not (options.fix or options.fix_only or options.diff or options.add_noqa):
            from dpcheck.cache import Cache
            cache_key = (settings.cache_folder, settings.codes)
            if cache_key not in caches:
                caches[cache_key] = Cache.open(settings.cache_folder, settings.codes)
            cache = caches[cache_key]
        key = (settings.codes, id(cache))
        if key not in index:
            index[key] = len(selections)
            selections.append(engine.Selection(settings.codes, cache))
        choice.append(index[key])
    # The cache settling reads module summaries from: the first one.
    cache = next(iter(caches.values()), None)
    inputs = engine.run_inputs(files, per_file_ignores, cache) if len(caches) == 1 else None
    if inputs is not None:
        run = engine.settled_from_cache(inputs, files, per_file_ignores, cache)
        if run is not None:
            startup.resume()
            return run, files, settings_of, [cache]
    summaries = engine.ModuleSummaries([str(f) for f in files], cache)
    startup.resume()
    results, _hits = engine.analyze_selected(files, choice, selections, options.jobs, summaries)
    probes: dict = {}
    run = engine.settle(results, per_file_ignores, cache, summaries, probes)
    if inputs is not None:
        engine.keep_settled(run, inputs, probes, cache)
    return run, files, settings_of, list(caches.values())


def _analyze_discovered(options: CheckOptions, resolver: Resolver, paths: list[Path]):
    """``_analyze`` without a cache: files are analysed as discovery finds them (the process pool
    starts once there are enough for one), so the workers are busy while the folders are walked."""
    from dpcheck import engine
    from dpcheck.discovery import discover

    settings = resolver.default
    settings_of: dict[str, Settings] = {}

    def discovered():
        for path in discover(paths, settings.root, settings.all_excludes, settings.force_exclude,
                             settings.respect_gitignore, resolver.excluder_for):
            own = settings_of[str(path)] = resolver.for_file(path)
            yield path, own.codes

    def per_file_ignores(name: str) -> list[str]:
        return settings_of[name].ignored_for(Path(name))

    scanned: list[str] = []  # filled as discovery goes; the guesses start once it has ended
    summaries = engine.ModuleSummaries(scanned)
    startup.resume()
    files, results = engine.analyze_discovered(discovered(), options.jobs, summaries, scanned)
    if not files:
        echo(NO_FILES_WARNING, err=True)
    run = engine.settle(results, per_file_ignores, None, summaries)
    return run, files, settings_of, []


def _confirm(findings: list[Finding], files: list[Path], settings: Settings, settings_of: dict[str, Settings],
             options: CheckOptions) -> list[Finding]:
    """Run the models; keep each file's selected codes, drop the noqa-suppressed findings."""
    from dpcheck.confirm import confirm_findings

    def selected(f: Finding) -> bool:
        own = settings_of.get(f.filename, settings)
        return f.code in own.codes or f.code in own.dynamic_codes

    confirmed = confirm_findings(findings, files, settings, options, lambda path: settings_of.get(str(path), settings))
    return [f for f in confirmed if not f.suppressed and selected(f)]


def _excluded(path: Path, resolver: Resolver) -> bool:
    from dpcheck.discovery import discover

    settings = resolver.for_file(path)
    return not list(discover([path], settings.root, settings.all_excludes, True, settings.respect_gitignore,
                             resolver.excluder_for))


# Formats that print each fix's edits: only these make offered fixes concrete (libcst).
_FORMATS_WITH_EDITS = frozenset({"json", "json-lines", "sarif"})


def _rule_instances(codes: list[str]) -> dict:
    from dpcheck.registry import rules_by_code

    table = rules_by_code()
    return {code: table[code]() for code in codes if code in table}


def _materialise_fixes(findings: list[Finding], codes: list[str], jobs: int | None) -> list[Finding]:
    """Turn offered fixes into edits, parsing with libcst only the files that have one;
    several such files are done in worker processes (a worker that dies costs only its
    file's edits: its findings are reported without them)."""
    from dpcheck import engine
    from dpcheck.fixes import materialise_file, withdraw_offers

    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.filename, []).append(f)
    tasks = [(filename, group, tuple(codes)) for filename, group in by_file.items()
             if filename != "-" and any(f.fix is not None and not f.fix.edits for f in group)]
    jobs = min(jobs or engine.default_jobs(), len(tasks))
    if jobs > 1:
        done = engine.map_isolated(_materialise_task, tasks, jobs, lambda task: withdraw_offers(task[1]),
                                   lambda task: engine.file_size(task[0]))
    else:
        rules = _rule_instances(codes)
        done = [materialise_file(filename, group, rules) for filename, group, _ in tasks]
    made = {task[0]: result for task, result in zip(tasks, done)}
    out: list[Finding] = []
    for filename, group in by_file.items():
        out.extend(made.get(filename, group))
    return out


def _materialise_task(task: tuple[str, list[Finding], tuple[str, ...]]) -> list[Finding]:
    """One file's fixes made concrete, in a worker process."""
    from dpcheck.fixes import materialise_file

    filename, group, codes = task
    return materialise_file(filename, group, _rule_instances(list(codes)))


def _apply_fixes(findings: list[Finding], options: CheckOptions, codes: list[str], run, codes_for):
    """``codes``: every selected code; ``codes_for(filename)``: the codes that file's settings select."""
    from dpcheck.fixes import fix_files

    outcome = fix_files(findings, _rule_instances(codes), options.unsafe_fixes, not options.diff,
                        _reanalyser(run, codes_for))
    for filename, reason in sorted(outcome.problems.items()):
        echo(f"warning: {filename}: not fixed: {reason}", err=True)
    if options.diff:
        for filename in sorted(outcome.diffs):
            sys.stdout.write(outcome.diffs[filename])
    if options.show_fixes and not options.diff:
        _show_fixes(outcome)
    count = outcome.fixed_count
    if count:
        verb = "Would fix" if options.diff else "Fixed"
        echo(f"{verb} {count} finding{'s' if count != 1 else ''}.", err=True)
    return outcome


def _reanalyser(run, codes_for):
    """``reanalyse(filename, text)`` for the fixers: the new text's findings, settled and
    selected as in the first run (``codes_for(filename)``: the codes that file selects)."""
    from dpcheck import engine

    def reanalyse(filename: str, text: str) -> list[Finding]:
        own = codes_for(filename)
        kept, _ = run.settle_file(filename, engine.check_stdin(text, filename, own).findings)
        return [f for f in kept if f.code in own]

    return reanalyse


def _stdin_name(options: CheckOptions) -> str:
    return options.stdin_filename or "-"


def _fix_stdin(text: str | None, findings: list[Finding], options: CheckOptions, codes: list[str], run,
               settings_of: dict, settings: Settings) -> int:
    """`--fix`/`--fix-only`/`--diff` on stdin, as ruff does: the fixed source (or, with
    --diff, the diff) goes to stdout, whatever is left to report goes to stderr."""
    from dpcheck.fixes import fix_text
    from dpcheck.registry import rule_infos

    name = _stdin_name(options)
    if text is None or name not in settings_of:  # excluded by force-exclude: echo it unchanged
        sys.stdout.write(text or "")
        return EXIT_CLEAN
    fixed, left, applied = fix_text(text, name, findings, _rule_instances(codes), options.unsafe_fixes,
                                    _reanalyser(run, lambda filename: settings_of[filename].codes))
    if options.diff:
        from dpcheck.fixes.text import unified_diff

        if fixed != text:
            sys.stdout.write(unified_diff(text, fixed, name))
            echo(f"Would fix {len(applied)} finding{'s' if len(applied) != 1 else ''}.", err=True)
        return EXIT_FINDINGS if fixed != text and not options.exit_zero else EXIT_CLEAN
    _emit(fixed)
    fail_level = Severity(settings.fail_level)
    if not options.fix_only:
        document = Report(left, rule_infos(), _repo_root(settings.root), codes, fail_level,
                          unsafe_fixes=options.unsafe_fixes)
        from dpcheck import report as reporting

        sys.stderr.write(reporting.render(document, settings.output_format, options.statistics, options.quiet,
                                          use_colour(options.color, settings.output_format, sys.stderr), []))
    if applied and options.exit_non_zero_on_fix:
        return EXIT_FINDINGS
    failing = not options.fix_only and any(Severity(f.severity).rank >= fail_level.rank for f in left)
    return EXIT_FINDINGS if failing and not options.exit_zero else EXIT_CLEAN


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
        echo(f"warning: {filename}: no noqa added: {reason}", err=True)
    echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.", err=True)
    return EXIT_CLEAN


def _repo_root(start: Path) -> Path:
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return start
