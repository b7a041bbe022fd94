"""How the command line is parsed (argparse): which command runs, what each option becomes,
and which usage errors exit 2 with one `error:` line."""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CLEAN, HAZARD, ROOT, run_cli

from dpcheck import __version__, cli
from dpcheck.record import fields
from dpcheck.run import CheckOptions, echo

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib


@pytest.fixture
def parsed(monkeypatch):
    """dispatch(argv) -> the CheckOptions that `check` would run with (nothing is checked)."""
    seen = []
    monkeypatch.setattr("dpcheck.run.run_check", lambda options: seen.append(options) or 0)

    def parse(*argv):
        assert cli.dispatch(list(argv)) == 0
        (options,) = seen
        seen.clear()
        return options
    return parse


def usage_error(capsys, *argv):
    """The one stderr line of a usage error, after checking it exits 2."""
    with pytest.raises(SystemExit) as exit_info:
        cli.dispatch(list(argv))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


def test_no_option_gives_the_defaults(parsed):
    assert parsed() == CheckOptions()
    assert parsed("check") == CheckOptions()


def test_every_check_option_has_a_flag():
    dests = {action.dest for action in cli.check_parser()._actions}
    assert {f.name for f in fields(CheckOptions)} <= dests


def test_an_option_first_still_means_check(parsed):
    options = parsed("--select", "DP1", "file.py")
    assert options.select == ["DP1"] and options.paths == [Path("file.py")]
    assert parsed("-q", "a.py").quiet


def test_options_and_paths_in_any_order(parsed):
    options = parsed("a.py", "--no-cache", "b.py", "-j", "3", "c")
    assert options.paths == [Path("a.py"), Path("b.py"), Path("c")]
    assert options.no_cache and options.jobs == 3


def test_after_double_dash_every_word_is_a_path(parsed):
    options = parsed("--no-cache", "a.py", "--", "-odd.py", "--fix")
    assert options.paths == [Path("a.py"), Path("-odd.py"), Path("--fix")] and not options.fix


def test_a_path_named_like_a_command(parsed, capsys):
    # Only the first word names a command: `rule` there is the rule command.
    assert parsed("check", "rule").paths == [Path("rule")]
    assert parsed("--", "rule").paths == [Path("rule")]
    assert parsed("./rule").paths == [Path("rule")]
    assert parsed("a.py", "rule").paths == [Path("a.py"), Path("rule")]
    assert "give either a rule code or --all" in usage_error(capsys, "rule")


def test_on_off_pairs_are_none_when_absent(parsed):
    assert parsed().force_exclude is None and parsed().respect_gitignore is None
    assert parsed("--force-exclude").force_exclude is True
    assert parsed("--no-force-exclude").force_exclude is False
    assert parsed("--force-exclude", "--no-force-exclude").force_exclude is False  # the last one wins
    assert parsed("--no-respect-gitignore").respect_gitignore is False
    assert parsed("--respect-gitignore").respect_gitignore is True


def test_repeatable_options_and_code_lists(parsed):
    options = parsed("--select", "DP1, dp3", "--select=DP2", "--ignore", "DP301", "--extend-select", "DP9")
    assert options.select == ["DP1", "DP3", "DP2"] and options.ignore == ["DP301"]
    assert options.extend_select == ["DP9"]
    options = parsed("--exclude", "a", "--exclude", "b", "--extend-exclude", "c",
                     "--per-file-ignores", "t/*.py:DP1", "--per-file-ignores", "u.py:DP3")
    assert options.exclude == ["a", "b"] and options.extend_exclude == ["c"]
    assert options.per_file_ignores == ["t/*.py:DP1", "u.py:DP3"]
    assert parsed().exclude is None and parsed().select is None  # absent: the configuration decides


def test_values_are_typed(parsed, tmp_path):
    config = tmp_path / "dpcheck.toml"
    config.write_text("")
    options = parsed("-j2", "-o", str(tmp_path / "out.json"), "--cache-dir", str(tmp_path / "c"),
                     "--timeout", "1.5", "--devices", "4", "--config", str(config), "--backend", "emulated",
                     "--output-format", "json", "--fail-level", "info", "--color", "never")
    assert options.jobs == 2 and options.devices == 4 and options.timeout == 1.5
    assert options.output_file == tmp_path / "out.json" and options.cache_dir == tmp_path / "c"
    assert options.config_path == config and isinstance(options.config_path, Path)
    assert (options.backend, options.output_format, options.fail_level, options.color) == \
        ("emulated", "json", "info", "never")


@pytest.mark.parametrize("argv, says", [
    (["-j", "0", "a.py"], "-j/--jobs: 0 is not in the range x>=1"),
    (["--jobs", "two"], "'two' is not a valid integer"),
    (["--devices", "1"], "--devices: 1 is not in the range x>=2"),
    (["--timeout", "0"], "--timeout"),
    (["--timeout", "nan"], "--timeout"),
    (["--output-format", "xml"], "invalid choice: 'xml'"),
    (["--fail-level", "bogus"], "--fail-level"),
    (["--config", "missing.toml"], "does not exist"),
    (["--config", "."], "is a directory"),
    (["-o", "."], "is a directory"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--fix-o"], "unrecognized arguments: --fix-o"),  # no abbreviations: a typo is an error
    (["--select"], "expected one argument"),
    (["check", "--version"], "unrecognized arguments: --version"),
    (["rule", "DP101", "--all"], "give either a rule code or --all"),
    (["rule", "DP101", "DP102"], "unrecognized arguments: DP102"),
    (["rule", "--output-format", "xml", "DP101"], "invalid choice"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys, argv, says):
    assert says in usage_error(capsys, *argv)


def test_usage_error_through_the_real_command():
    proc = run_cli("-j", "0", "a.py")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: argument -j/--jobs") and proc.stderr.count("\n") == 1
    proc = run_cli("rule")
    assert proc.returncode == 2 and proc.stderr.startswith("error: give either a rule code or --all")


def test_version_and_help(capsys):
    assert cli.dispatch(["--version"]) == 0
    assert capsys.readouterr().out == f"dpcheck {__version__}\n"
    for flag in ("-h", "--help"):
        assert cli.dispatch([flag]) == 0
        out = capsys.readouterr().out
        assert "check" in out and "rule" in out and "--version" in out
    for argv in (["check", "-h"], ["--select", "DP1", "--help"], ["rule", "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.dispatch(argv)
        assert exit_info.value.code == 0
        out = capsys.readouterr().out
        assert ("--all" in out) == (argv[0] == "rule")
        assert ("--no-force-exclude" in out) == (argv[0] != "rule")


def test_rule_code_after_an_option(capsys):
    assert cli.dispatch(["rule", "--output-format", "json", "dp101"]) == 0
    assert '"code": "DP101"' in capsys.readouterr().out
    assert cli.dispatch(["rule", "--", "DP101"]) == 0
    assert capsys.readouterr().out.startswith("# DP101 ")


def test_unknown_rule_exits_2(capsys):
    assert cli.dispatch(["rule", "DP999"]) == 2
    assert capsys.readouterr().err == "error: unknown rule `DP999` (see `dpcheck rule --all`)\n"


def test_main_exits_with_the_commands_status(monkeypatch, capsys):
    monkeypatch.setattr(cli, "dispatch", lambda argv: 7 if argv == ["x"] else 0)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["x"])
    assert exit_info.value.code == 7

    def interrupted(argv):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "dispatch", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 1 and capsys.readouterr().err == "\nAborted!\n"


def test_the_program_ends_without_teardown_once_its_output_is_out(project):
    """`python -m dpcheck` (main without arguments) writes its whole report, exits with the
    command's status, and skips the interpreter's teardown (an atexit handler does not run)."""
    (project / "bad.py").write_text(HAZARD)
    probe = ("import atexit, runpy, sys\natexit.register(lambda: sys.stderr.write('teardown ran'))\n"
             "sys.argv = ['dpcheck', *sys.argv[1:]]\nrunpy.run_module('dpcheck', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", probe, "bad.py", "--no-cache", "--output-format", "concise"],
                          cwd=project, capture_output=True, text=True, timeout=300, check=False)
    expected = run_cli("bad.py", "--no-cache", "--output-format", "concise", cwd=project)
    assert proc.returncode == expected.returncode == 1 and "DP101" in proc.stdout
    assert proc.stdout == expected.stdout and "teardown ran" not in proc.stderr


def test_the_program_exits_the_usual_way_while_a_thread_still_runs():
    """A thread still running (or a child process) still has work that teardown waits for:
    ``_end_process`` leaves the exit to ``sys.exit`` then."""
    import threading

    release = threading.Event()
    waiting = threading.Thread(target=release.wait)
    waiting.start()
    try:
        assert cli._end_process(0) is None  # returned: the process is still here
    finally:
        release.set()
        waiting.join()


def test_echo_writes_one_flushed_line(capsys):
    echo("to stdout")
    echo("to stderr", err=True)
    captured = capsys.readouterr()
    assert captured.out == "to stdout\n" and captured.err == "to stderr\n"


def test_packaging_console_script_and_pre_commit_entry(parsed):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["dpcheck"] == "dpcheck.cli:main"
    assert not any(dep.lower().startswith("click") for dep in project["dependencies"])
    entry = next(line.split(":", 1)[1].split() for line in (ROOT / ".pre-commit-hooks.yaml").read_text().splitlines()
                 if line.strip().startswith("entry:"))
    assert entry[0] == "dpcheck"
    options = parsed(*entry[1:], "pkg/model.py", "other.py")  # pre-commit appends the staged files
    assert options.force_exclude is True and options.paths == [Path("pkg/model.py"), Path("other.py")]


def _modules_after_a_run(folder, *argv):
    """The modules a whole `dpcheck` run in ``folder`` imported."""
    # (main with its arguments given: without them it is the program, which ends the process.)
    probe = ("import sys\nimport dpcheck.__main__\nfrom dpcheck.cli import main\n"
             "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "print(' '.join(sorted(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", probe, *argv], cwd=folder, capture_output=True, text=True,
                          timeout=300, check=False)
    return set(proc.stdout.splitlines()[-1].split()), proc


def test_a_one_file_run_imports_only_what_it_needs(project):
    """The one-file run is mostly imports: what only --fix, --confirm, help text, rule docs or a
    dpcheck configuration need is imported only then."""
    (project / "bad.py").write_text(HAZARD)
    (project / "clean.py").write_text(CLEAN)
    (project / "pyproject.toml").write_text('[tool.ruff]\nline-length = 100\n')  # configures another tool only
    never = {"click", "libcst", "torch", "shutil", "dpcheck.confirmation", "dpcheck.harness", "traceback",
             # dataclasses (and the inspect it imports): dpcheck's value types are record classes;
             # pkgutil imports inspect too; tokenize: a UTF-8 file without a coding cookie or noqa
             "dataclasses", "inspect", "pkgutil", "tokenize"}
    modules, proc = _modules_after_a_run(project, "bad.py", "--no-cache", "-q")
    assert proc.returncode == 0 and not modules & never, sorted(modules & never)
    assert "dpcheck.run" in modules  # the probe saw a real run
    clean, _ = _modules_after_a_run(project, "clean.py", "--no-cache")
    assert not clean & (never | {"textwrap", "tomllib"}), sorted(clean & (never | {"textwrap", "tomllib"}))
    first, _ = _modules_after_a_run(project, "bad.py", "-q")  # fills the cache: writing it needs tempfile
    cached, proc = _modules_after_a_run(project, "bad.py", "-q")
    assert "tempfile" in first and "dpcheck.cache" in cached and proc.returncode == 0
    assert not cached & (never | {"tempfile"}), sorted(cached & (never | {"tempfile"}))


def test_a_pyproject_toml_is_parsed_when_it_may_configure_dpcheck(project):
    (project / "bad.py").write_text(HAZARD)
    for text in ('[tool . dpcheck]\nselect = ["DP3"]\n', '[tool]\ndpcheck = {select = ["DP3"]}\n',
                 '[tool."dpcheck"]\nselect = ["DP3"]\n'):
        (project / "pyproject.toml").write_text(text)
        proc = run_cli("bad.py", "--no-cache", "--output-format", "concise", cwd=project)
        assert "DP301" in proc.stdout and "DP101" not in proc.stdout, (text, proc.stdout, proc.stderr)
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP3"\n')  # broken, and ours: an error
    proc = run_cli("bad.py", "--no-cache", cwd=project)
    assert proc.returncode == 2 and "cannot parse" in proc.stderr
