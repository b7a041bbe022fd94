"""The `dpcheck` command line (click), following ruff's conventions.

`dpcheck [PATHS]...` checks files (the `check` subcommand is implied); `dpcheck rule
CODE` prints a rule's documentation. Exit codes: 0 clean, 1 findings, 2 usage error
or internal failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dpcheck import __version__
from dpcheck.constants import BACKENDS, EXIT_ERROR, FAIL_LEVELS, OUTPUT_FORMATS


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip().upper() for value in values for part in value.split(",") if part.strip()]


class _DefaultToCheck(click.Group):
    """`dpcheck PATHS` means `dpcheck check PATHS`, like ruff's old top-level form."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h", "--version")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToCheck, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="dpcheck", message="%(prog)s %(version)s")
def main() -> None:
    """Find torch.nn.DataParallel hazards in PyTorch model source."""


@main.command("check")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--select", multiple=True, help="Rule codes or prefixes to enable (a code, a prefix such as DP1, or ALL).")
@click.option("--extend-select", multiple=True, help="Codes or prefixes to enable on top of the selection.")
@click.option("--ignore", multiple=True, help="Codes or prefixes to disable.")
@click.option("--extend-ignore", multiple=True, help="Codes or prefixes to disable on top of `ignore`.")
@click.option("--per-file-ignores", multiple=True, metavar="GLOB:CODES",
              help="Disable codes for matching files, e.g. 'tests/*.py:DP1' (repeatable; replaces the config's).")
@click.option("--extend-per-file-ignores", multiple=True, metavar="GLOB:CODES",
              help="Like --per-file-ignores, added to the configuration's.")
@click.option("--exclude", multiple=True, help="Patterns to exclude (replaces the defaults).")
@click.option("--extend-exclude", multiple=True, help="Patterns to exclude on top of the defaults.")
@click.option("--force-exclude/--no-force-exclude", default=None,
              help="Apply excludes to paths passed explicitly (as pre-commit does).")
@click.option("--respect-gitignore/--no-respect-gitignore", default=None, help="Honour .gitignore files.")
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS),
              default=None, help="How to print findings (default: full).")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to this file instead of stdout.")
@click.option("--color", "color", type=click.Choice(["auto", "always", "never"]), default="auto",
              help="Colour full/concise output (auto: on a terminal unless NO_COLOR is set).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Use this pyproject.toml or dpcheck.toml for every file instead of each file's closest one.")
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option("--show-settings", is_flag=True, help="Print the settings that apply to the first PATH, then exit.")
@click.option("--show-files", is_flag=True, help="Print the files that would be checked, then exit.")
@click.option("--stdin-filename", help="Read the code from stdin and report it as this path "
                                       "(its closest configuration applies).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--fail-level", type=click.Choice(FAIL_LEVELS), default=None,
              help="The least severe finding that gives exit 1 (default: warning; info never fails).")
@click.option("--statistics", is_flag=True, help="Print a count per rule instead of the findings.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: all cores).")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), help="Cache folder (default .dpcheck_cache).")
@click.option("--fix", is_flag=True, help="Apply safe fixes (add --unsafe-fixes for the others).")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply, and count as fixable, fixes that may change behaviour.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff and write nothing (exit 1 if any).")
@click.option("--fix-only", is_flag=True, help="Apply fixes and report nothing that remains.")
@click.option("--show-fixes", is_flag=True, help="List the fixes applied, per file.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a fix was applied, even if nothing remains.")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding.")
@click.option("--confirm", is_flag=True, help="Import each model and run it under a DataParallel harness.")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="Harness backend for --confirm (default auto: cuda with >=2 GPUs, else emulated).")
@click.option("--devices", type=click.IntRange(min=2), default=None, help="Devices for --confirm (default: all, at least 2).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds per file for --confirm (default 60).")
def check(paths, select, extend_select, ignore, extend_ignore, per_file_ignores, extend_per_file_ignores,
          exclude, extend_exclude, force_exclude, respect_gitignore, output_format, output_file, color,
          config_path, isolated, show_settings, show_files, stdin_filename, exit_zero,
          fail_level, statistics, quiet, jobs, no_cache, cache_dir, fix, unsafe_fixes, diff, fix_only, show_fixes,
          exit_non_zero_on_fix, add_noqa, confirm, backend, devices, timeout):
    """Check PATHS (default: the current folder; `-` or --stdin-filename alone: stdin) for
    DataParallel hazards."""
    from dpcheck.run import CheckOptions, run_check

    options = CheckOptions(
        paths=list(paths), select=_split(select) if select else None, extend_select=_split(extend_select),
        ignore=_split(ignore), extend_ignore=_split(extend_ignore), per_file_ignores=list(per_file_ignores),
        extend_per_file_ignores=list(extend_per_file_ignores),
        exclude=list(exclude) or None, extend_exclude=list(extend_exclude),
        force_exclude=force_exclude, respect_gitignore=respect_gitignore, output_format=output_format,
        output_file=output_file, color=color, config_path=config_path, isolated=isolated,
        show_settings=show_settings, show_files=show_files, stdin_filename=stdin_filename, exit_zero=exit_zero,
        fail_level=fail_level, statistics=statistics, quiet=quiet, jobs=jobs, no_cache=no_cache, cache_dir=cache_dir,
        fix=fix, unsafe_fixes=unsafe_fixes, diff=diff, fix_only=fix_only, show_fixes=show_fixes,
        exit_non_zero_on_fix=exit_non_zero_on_fix, add_noqa=add_noqa, confirm=confirm, backend=backend, devices=devices,
        timeout=timeout)
    sys.exit(run_check(options))


@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule(code, show_all, output_format):
    """Print the documentation of rule CODE, or list every rule with --all."""
    from dpcheck.registry import all_rules, rules_by_code

    if show_all == bool(code):
        raise click.UsageError("give either a rule code or --all")
    rules = list(all_rules()) if show_all else [rules_by_code().get(code.upper())]
    if rules == [None]:
        click.echo(f"error: unknown rule `{code}` (see `dpcheck rule --all`)", err=True)
        sys.exit(EXIT_ERROR)
    if output_format == "json":
        data = [{"code": r.code, "name": r.name, "severity": r.severity.value, "summary": r.summary,
                 "explanation": r.explanation(), "fix": r.fix_hint, "kind": r.kind,
                 "default_enabled": r.default_enabled, "url": r.url(),
                 "bad_example": r.bad_example, "good_example": r.good_example} for r in rules]
        import json

        click.echo(json.dumps(data if show_all else data[0], indent=2))
    elif show_all:
        for r in rules:
            flag = "" if r.default_enabled else " (off by default)"
            click.echo(f"{r.code}  {r.name:<40} {r.severity.value:<8} {r.summary}{flag}")
    else:
        click.echo(rules[0].markdown())
