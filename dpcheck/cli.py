"""The `dpcheck` command line (the standard library's argparse), following ruff's conventions.

`dpcheck [PATHS]...` checks files (the `check` subcommand is implied); `dpcheck rule
CODE` prints a rule's documentation. Exit codes: 0 clean, 1 findings, 2 usage error
or internal failure.

The first argument picks the command: `check` or `rule` name one, `-h`/`--help` and
`--version` are the program's own, anything else is `check`'s (so `dpcheck --select DP1
model.py` is `dpcheck check --select DP1 model.py`). A path that is spelt like a command
is checked with `dpcheck check rule`, `dpcheck ./rule` or `dpcheck -- rule`.

argparse, not click: a one-file run is mostly interpreter start and imports, and click,
with what it imports, was the largest single block of them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dpcheck import __version__, startup
from dpcheck.constants import BACKENDS, EXIT_ERROR, FAIL_LEVELS, OUTPUT_FORMATS

PROG = "dpcheck"
DESCRIPTION = "Find torch.nn.DataParallel hazards in PyTorch model source."
CHECK_HELP = ("Check PATHS (default: the current folder; `-` or --stdin-filename alone: stdin) for "
              "DataParallel hazards.")
RULE_HELP = "Print the documentation of rule CODE, or list every rule with --all."
COMMANDS = {"check": CHECK_HELP, "rule": RULE_HELP}
# Ctrl-C and a reader that closed the pipe end the run with 1, as they did under click.
EXIT_ABORTED = 1


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit 2, as in ruff (not argparse's usage block)."""

    def error(self, message: str):
        sys.stderr.write(f"error: {message} (see `{self.prog} --help`)\n")
        sys.exit(EXIT_ERROR)


def _terminal_width() -> int:
    """shutil.get_terminal_size()'s answer, without importing shutil (4 ms with the
    compression modules it pulls in): argparse builds a help formatter for every option it
    is given, only to check the option's metavar, so the default one imports shutil on
    every run."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


def _help_formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=_terminal_width() - 2)


def _parser(prog: str, description: str) -> _Parser:
    # allow_abbrev=False: as under click (and in ruff), `--unsafe` is a typo and an error,
    # not an abbreviation of `--unsafe-fixes`.
    return _Parser(prog=prog, description=description, allow_abbrev=False, formatter_class=_help_formatter)


# Value checks. argparse reports an ArgumentTypeError as "argument -j/--jobs: <message>".

def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid integer") from None


def _at_least(low: int):
    def check(text: str) -> int:
        value = _integer(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is not in the range x>={low}")
        return value
    return check


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid float") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{value} is not in the range x>0")
    return value


def _existing_file(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"file {text!r} does not exist")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"file {text!r} is a directory")
    return path


def _not_a_directory(text: str) -> Path:
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"file {text!r} is a directory")
    return path


def _not_a_file(text: str) -> Path:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"directory {text!r} is a file")
    return path


def _split(values: list[str] | None) -> list[str]:
    return [part.strip().upper() for value in values or () for part in value.split(",") if part.strip()]


def check_parser() -> _Parser:
    p = _parser(f"{PROG} check", CHECK_HELP)
    add, flag = p.add_argument, lambda *names, help: p.add_argument(*names, action="store_true", help=help)
    add("paths", nargs="*", type=Path, metavar="PATHS",
        help="Files and folders to check (default: the current folder; `-`: stdin).")
    add("--select", action="append", metavar="CODES",
        help="Rule codes or prefixes to enable (a code, a prefix such as DP1, or ALL).")
    add("--extend-select", action="append", metavar="CODES",
        help="Codes or prefixes to enable on top of the selection.")
    add("--ignore", action="append", metavar="CODES", help="Codes or prefixes to disable.")
    add("--extend-ignore", action="append", metavar="CODES", help="Codes or prefixes to disable on top of `ignore`.")
    add("--per-file-ignores", action="append", metavar="GLOB:CODES",
        help="Disable codes for matching files, e.g. 'tests/*.py:DP1' (repeatable; replaces the config's).")
    add("--extend-per-file-ignores", action="append", metavar="GLOB:CODES",
        help="Like --per-file-ignores, added to the configuration's.")
    add("--exclude", action="append", metavar="PATTERN", help="Patterns to exclude (replaces the defaults).")
    add("--extend-exclude", action="append", metavar="PATTERN", help="Patterns to exclude on top of the defaults.")
    # `--x/--no-x` pairs: True, False, or None when neither is given (the configuration decides).
    add("--force-exclude", action=argparse.BooleanOptionalAction,
        help="Apply excludes to paths passed explicitly (as pre-commit does).")
    add("--respect-gitignore", action=argparse.BooleanOptionalAction, help="Honour .gitignore files.")
    add("--output-format", choices=OUTPUT_FORMATS, help="How to print findings (default: full).")
    add("-o", "--output-file", type=_not_a_directory, metavar="FILE",
        help="Write the report to this file instead of stdout.")
    add("--color", choices=("auto", "always", "never"), default="auto",
        help="Colour full/concise output (auto: on a terminal unless NO_COLOR is set).")
    add("--config", dest="config_path", type=_existing_file, metavar="FILE",
        help="Use this pyproject.toml or dpcheck.toml for every file instead of each file's closest one.")
    flag("--isolated", help="Ignore every configuration file.")
    flag("--show-settings", help="Print the settings that apply to the first PATH, then exit.")
    flag("--show-files", help="Print the files that would be checked, then exit.")
    add("--stdin-filename", metavar="PATH",
        help="Read the code from stdin and report it as this path (its closest configuration applies).")
    flag("--exit-zero", help="Exit 0 even when there are findings.")
    add("--fail-level", choices=FAIL_LEVELS,
        help="The least severe finding that gives exit 1 (default: warning; info never fails).")
    flag("--statistics", help="Print a count per rule instead of the findings.")
    flag("-q", "--quiet", help="Print findings only, no summary.")
    add("-j", "--jobs", type=_at_least(1), metavar="N", help="Worker processes (default: all cores).")
    flag("--no-cache", help="Neither read nor write the result cache.")
    add("--cache-dir", type=_not_a_file, metavar="DIR", help="Cache folder (default .dpcheck_cache).")
    flag("--fix", help="Apply safe fixes (add --unsafe-fixes for the others).")
    flag("--unsafe-fixes", help="Also apply, and count as fixable, fixes that may change behaviour.")
    flag("--diff", help="Print the fixes as a unified diff and write nothing (exit 1 if any).")
    flag("--fix-only", help="Apply fixes and report nothing that remains.")
    flag("--show-fixes", help="List the fixes applied, per file.")
    flag("--exit-non-zero-on-fix", help="Exit 1 when a fix was applied, even if nothing remains.")
    flag("--add-noqa", help="Add `# noqa: CODE` to every line with a finding.")
    flag("--confirm", help="Import each model and run it under a DataParallel harness.")
    add("--backend", choices=BACKENDS,
        help="Harness backend for --confirm (default auto: cuda with >=2 GPUs, else emulated).")
    add("--devices", type=_at_least(2), metavar="N", help="Devices for --confirm (default: all, at least 2).")
    add("--timeout", type=_positive_seconds, metavar="SECONDS", help="Seconds per file for --confirm (default 60).")
    return p


def rule_parser() -> _Parser:
    p = _parser(f"{PROG} rule", RULE_HELP)
    p.add_argument("code", nargs="?", metavar="CODE", help="A rule code (`dpcheck rule --all` lists them).")
    p.add_argument("--all", dest="show_all", action="store_true", help="List every rule.")
    p.add_argument("--output-format", choices=("text", "json"), default="text",
                   help="Markdown-like text or JSON (default: text).")
    return p


def top_help() -> str:
    width = max(map(len, COMMANDS))
    commands = "\n".join(f"  {name:<{width}}  {text}" for name, text in COMMANDS.items())
    return (f"usage: {PROG} [-h] [--version] [check] [OPTIONS] [PATHS ...]\n"
            f"       {PROG} rule [-h] [--all] [--output-format {{text,json}}] [CODE]\n\n"
            f"{DESCRIPTION}\n\ncommands:\n{commands}\n  (no command: check)\n\n"
            f"options:\n  -h, --help  show this help message and exit\n  --version   show the version and exit\n\n"
            f"`{PROG} COMMAND --help` lists a command's options.\n")


def _parse(parser: _Parser, argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Options and positionals in any order (`dpcheck a.py --no-cache b.py`), and the
    arguments after `--`, which are positionals whatever they look like (a path that
    starts with `-`). Python 3.11's intermixed parsing mishandles `--`, so that tail is
    split off here and returned for the command to add to its positionals."""
    if "--" not in argv:
        return parser.parse_intermixed_args(argv), []
    cut = argv.index("--")
    return parser.parse_intermixed_args(argv[:cut]), argv[cut + 1:]


def check(argv: list[str]) -> int:
    args, more_paths = _parse(check_parser(), argv)
    args.paths += map(Path, more_paths)
    from dpcheck.run import CheckOptions, run_check

    options = CheckOptions(
        paths=args.paths, select=_split(args.select) if args.select else None, extend_select=_split(args.extend_select),
        ignore=_split(args.ignore), extend_ignore=_split(args.extend_ignore),
        per_file_ignores=args.per_file_ignores or [], extend_per_file_ignores=args.extend_per_file_ignores or [],
        exclude=args.exclude or None, extend_exclude=args.extend_exclude or [],
        force_exclude=args.force_exclude, respect_gitignore=args.respect_gitignore, output_format=args.output_format,
        output_file=args.output_file, color=args.color, config_path=args.config_path, isolated=args.isolated,
        show_settings=args.show_settings, show_files=args.show_files, stdin_filename=args.stdin_filename,
        exit_zero=args.exit_zero, fail_level=args.fail_level, statistics=args.statistics, quiet=args.quiet,
        jobs=args.jobs, no_cache=args.no_cache, cache_dir=args.cache_dir, fix=args.fix, unsafe_fixes=args.unsafe_fixes,
        diff=args.diff, fix_only=args.fix_only, show_fixes=args.show_fixes,
        exit_non_zero_on_fix=args.exit_non_zero_on_fix, add_noqa=args.add_noqa, confirm=args.confirm,
        backend=args.backend, devices=args.devices, timeout=args.timeout)
    return run_check(options)


def rule(argv: list[str]) -> int:
    parser = rule_parser()
    args, more = _parse(parser, argv)
    if more and args.code is None:
        args.code, more = more[0], more[1:]
    if more:
        parser.error(f"unrecognized arguments: {' '.join(more)}")
    if args.show_all == bool(args.code):
        parser.error("give either a rule code or --all")
    from dpcheck.registry import all_rules, rules_by_code
    from dpcheck.run import echo

    rules = list(all_rules()) if args.show_all else [rules_by_code().get(args.code.upper())]
    if rules == [None]:
        echo(f"error: unknown rule `{args.code}` (see `dpcheck rule --all`)", err=True)
        return EXIT_ERROR
    if args.output_format == "json":
        import json

        data = [{"code": r.code, "name": r.name, "severity": r.severity.value, "summary": r.summary,
                 "explanation": r.explanation(), "fix": r.fix_hint, "kind": r.kind,
                 "default_enabled": r.default_enabled, "url": r.url(),
                 "bad_example": r.bad_example, "good_example": r.good_example} for r in rules]
        echo(json.dumps(data if args.show_all else data[0], indent=2))
    elif args.show_all:
        for r in rules:
            flag = "" if r.default_enabled else " (off by default)"
            echo(f"{r.code}  {r.name:<40} {r.severity.value:<8} {r.summary}{flag}")
    else:
        echo(rules[0].markdown())
    return 0


def dispatch(argv: list[str]) -> int:
    first = argv[0] if argv else None
    if first in ("-h", "--help"):
        sys.stdout.write(top_help())
        return 0
    if first == "--version":
        sys.stdout.write(f"{PROG} {__version__}\n")
        return 0
    if first == "rule":
        return rule(argv[1:])
    return check(argv[1:] if first == "check" else argv)


def main(argv: list[str] | None = None) -> None:
    """The console script: exits with the command's status. Called without ``argv`` it is the
    program itself (the console script, `python -m dpcheck`) and ends the process at once (see
    ``_end_process``); with ``argv``, it raises SystemExit like any command called in-process."""
    startup.pause()  # until the first file is analysed (see dpcheck.startup)
    try:
        status = dispatch(sys.argv[1:] if argv is None else list(argv))
    except (EOFError, KeyboardInterrupt):
        # As under click before: a blank line, "Aborted!" and exit 1.
        sys.stderr.write("\nAborted!\n")
        status = EXIT_ABORTED
    except BrokenPipeError:
        # The reader left (`dpcheck rule --all | head`): point stdout at /dev/null so the
        # flush at exit does not fail again, and exit 1 as click did.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = EXIT_ABORTED
    finally:
        startup.resume()  # a command that analysed no file (help, `rule`, a usage error)
    if argv is None and isinstance(status, int):
        _end_process(status)
    sys.exit(status)


def _end_process(status: int) -> None:
    """Exit with ``status`` without the interpreter's teardown, once everything written is out:
    after a run that used a process pool, the teardown (freeing every module and what it holds,
    the pool's machinery included) took tens of milliseconds on timm and more on larger trees,
    after the report was written. Returns instead (the caller exits the usual way) where
    teardown still has work to do: a thread or a child process still running, or a stream
    that cannot be flushed (a reader that left: its error is reported as Python reports it)."""
    threads = sys.modules.get("threading")  # (not imported: no thread was started through it)
    if threads is not None and threads.active_count() > 1:
        return
    processes = sys.modules.get("multiprocessing")
    if processes is not None and processes.active_children():
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed pipe, a closed stream
        return
    os._exit(status)
