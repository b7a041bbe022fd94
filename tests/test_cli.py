"""Exit codes, selection, stdin, rule docs, suppressions and bad input, through the real CLI."""

import json

from conftest import CLEAN, HAZARD, run_cli

from dpcheck.registry import all_rules


def test_exit_codes(project):
    (project / "clean.py").write_text(CLEAN)
    (project / "bad.py").write_text(HAZARD)
    assert run_cli("clean.py", "--no-cache", cwd=project).returncode == 0
    assert run_cli("bad.py", "--no-cache", cwd=project).returncode == 1
    assert run_cli("bad.py", "--no-cache", "--exit-zero", cwd=project).returncode == 0
    assert run_cli("missing.py", cwd=project).returncode == 2
    assert run_cli("bad.py", "--select", "DP999", cwd=project).returncode == 2
    assert run_cli("bad.py", "--output-format", "xml", cwd=project).returncode == 2


def test_clean_run_says_so(project):
    (project / "clean.py").write_text(CLEAN)
    assert "All checks passed!" in run_cli("clean.py", "--no-cache", cwd=project).stdout


def codes(proc):
    return sorted(f["code"] for f in json.loads(proc.stdout))


def test_select_ignore_and_prefixes(project):
    (project / "bad.py").write_text(HAZARD)
    run = lambda *a: codes(run_cli("bad.py", "--no-cache", "--output-format", "json", *a, cwd=project))
    assert run() == ["DP101", "DP301"]
    assert run("--select", "DP3") == ["DP301"]
    assert run("--select", "DP1,DP3", "--ignore", "DP301") == ["DP101"]
    assert run("--ignore", "DP") == []
    assert run("--select", "DP101", "--ignore", "DP1") == ["DP101"]  # the more specific wins
    assert run("--select", "DP3", "--extend-select", "DP101") == ["DP101", "DP301"]
    assert run("--select", "ALL", "--ignore", "DP1") == ["DP301"]


def test_stdin_with_filename(project):
    proc = run_cli("-", "--stdin-filename", "pkg/model.py", "--output-format", "json", stdin=HAZARD,
                   cwd=project)
    assert proc.returncode == 1
    findings = json.loads(proc.stdout)
    assert {f["filename"].rsplit("/", 2)[-2:] == ["pkg", "model.py"] for f in findings} == {True}
    assert codes(proc) == ["DP101", "DP301"]


def test_stdin_without_filename():
    proc = run_cli("-", "--output-format", "concise", stdin=HAZARD)
    assert proc.stdout.startswith("-:12:9: DP101")


def test_noqa_on_the_line_and_bare_noqa(project):
    source = HAZARD.replace("self.steps += 1", "self.steps += 1  # noqa: DP101") \
                   .replace('.to("cuda:0")', '.to("cuda:0")  # noqa')
    (project / "m.py").write_text(source)
    assert run_cli("m.py", "--no-cache", cwd=project).returncode == 0
    other = HAZARD.replace("self.steps += 1", "self.steps += 1  # noqa: E501")
    (project / "m.py").write_text(other)
    assert codes(run_cli("m.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP101", "DP301"]


def test_file_level_noqa(project):
    (project / "a.py").write_text("# dpcheck: noqa: DP301\n" + HAZARD)
    (project / "b.py").write_text("# dpcheck: noqa\n" + HAZARD)
    assert codes(run_cli("a.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP101"]
    assert run_cli("b.py", "--no-cache", cwd=project).returncode == 0


def test_syntax_error_and_bad_encoding_are_reported_and_the_run_goes_on(project):
    (project / "broken.py").write_text("class A(:\n    pass\n")
    (project / "latin.py").write_bytes(b"x = '\xe9\xff'\n")
    (project / "bad.py").write_text(HAZARD)
    proc = run_cli(".", "--no-cache", "--output-format", "json", cwd=project)
    assert proc.returncode == 1
    findings = json.loads(proc.stdout)
    by_file = {(f["filename"].rsplit("/", 1)[-1], f["code"]) for f in findings}
    assert ("broken.py", "DP001") in by_file and ("latin.py", "DP001") in by_file
    assert ("bad.py", "DP101") in by_file
    broken = next(f for f in findings if f["filename"].endswith("broken.py"))
    assert broken["location"]["row"] == 1 and "SyntaxError" in broken["message"]


def test_a_script_in_python_3_6_syntax_is_analysed_like_its_modern_spelling(project):
    # PyTorch before 0.4 spelled non_blocking `async`: valid Python 3.6, refused by 3.7+.
    loop = "\nmodel = nn.DataParallel(Net()).cuda()\nfor x in range(3):\n    model(torch.ones(2, 4).cuda({}=True))\n"
    (project / "old.py").write_text(HAZARD + loop.format("async"))
    (project / "new.py").write_text(HAZARD + loop.format("non_blocking"))
    old = json.loads(run_cli("old.py", "--no-cache", "--output-format", "json", cwd=project).stdout)
    new = json.loads(run_cli("new.py", "--no-cache", "--output-format", "json", cwd=project).stdout)
    assert [(f["code"], f["severity"], f["location"]) for f in old] == [
        (f["code"], f["severity"], f["location"]) for f in new]
    assert "DP001" not in {f["code"] for f in old} and "DP101" in {f["code"] for f in old}
    # libcst reads no grammar that takes `async` as a name: --fix changes nothing and offers nothing.
    before = (project / "old.py").read_bytes()
    fixed = run_cli("old.py", "--no-cache", "--fix", "--unsafe-fixes", cwd=project)
    assert (project / "old.py").read_bytes() == before and "fixable" not in fixed.stdout
    modern = (project / "new.py").read_bytes()
    run_cli("new.py", "--no-cache", "--fix", "--unsafe-fixes", cwd=project)
    assert (project / "new.py").read_bytes() != modern
    # What no Python 3 grammar reads is still a syntax error, placed where the running Python stops.
    (project / "py2.py").write_text("x.cuda(async=True)\nprint 'done'\n")
    broken = json.loads(run_cli("py2.py", "--no-cache", "--output-format", "json", cwd=project).stdout)
    assert [(f["code"], f["location"]["row"]) for f in broken] == [("DP001", 1)]


def test_rule_exception_is_an_internal_error_and_others_still_report(project, monkeypatch, capsys):
    from dpcheck import run as run_module
    from dpcheck.registry import rules_by_code

    (project / "bad.py").write_text(HAZARD)
    monkeypatch.chdir(project)
    rule = rules_by_code()["DP101"]
    monkeypatch.setattr(rule, "check_class", lambda self, model: 1 / 0)
    code = run_module.run_check(run_module.CheckOptions(paths=[project / "bad.py"], no_cache=True,
                                                        output_format="json", jobs=1))
    findings = json.loads(capsys.readouterr().out)
    assert code == 2
    assert {f["code"] for f in findings} == {"DP002", "DP301"}
    assert "ZeroDivisionError" in next(f for f in findings if f["code"] == "DP002")["message"]


def test_rule_docs():
    proc = run_cli("rule", "DP101")
    assert proc.returncode == 0
    assert "# DP101 attribute-assigned-in-forward" in proc.stdout
    assert "## Why is this bad?" in proc.stdout and "```python" in proc.stdout
    listing = run_cli("rule", "--all").stdout.splitlines()
    assert len(listing) == len(all_rules())
    data = json.loads(run_cli("rule", "--all", "--output-format", "json").stdout)
    assert [r["code"] for r in data] == [r.code for r in all_rules()]
    assert run_cli("rule", "DP999").returncode == 2


def test_version():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("dpcheck ")


def test_fix_applies_unsafe_fixes_only_when_asked(project):
    path = project / "m.py"
    path.write_text(HAZARD.replace('.to("cuda:0")', ".cuda(0)"))
    before = path.read_text()
    run_cli("m.py", "--fix", cwd=project)
    assert path.read_text() == before
    proc = run_cli("m.py", "--fix", "--unsafe-fixes", "--output-format", "json", cwd=project)
    assert "self.fc(x).cuda()" in path.read_text()
    compile(path.read_text(), "m.py", "exec")
    assert codes(proc) == []  # DP301's and DP101's (the counter) fixes are both unsafe
    assert "self.steps.add_(1)" in path.read_text()


def test_fix_never_writes_an_unparsable_file(tmp_path):
    from dpcheck.fixes import writer

    path = tmp_path / "m.py"
    path.write_text("x = torch.zeros(3).cuda(0)\n")
    snapshot = writer.read(path)
    try:
        writer.write(snapshot, "x = (((\n")
    except writer.FixWriteError as exc:
        assert "would not parse" in str(exc)
    else:
        raise AssertionError("an unparsable result was written")
    assert path.read_text() == "x = torch.zeros(3).cuda(0)\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]  # no temporary file left behind


def test_stdin_filename_alone_reads_stdin_with_that_files_config(project):
    # A folder full of other hazards must not be checked instead of stdin.
    (project / "other.py").write_text(HAZARD)
    (project / "sub").mkdir()
    (project / "sub" / "pyproject.toml").write_text('[tool.dpcheck]\nselect = ["DP3"]\n')
    proc = run_cli("--stdin-filename", "sub/m.py", "--output-format", "json", stdin=HAZARD, cwd=project)
    assert proc.returncode == 1, proc.stderr
    findings = json.loads(proc.stdout)
    assert {f["filename"].rsplit("/", 2)[-2:] == ["sub", "m.py"] for f in findings} == {True}
    assert codes(proc) == ["DP301"]
    clean = run_cli("--stdin-filename", "m.py", stdin=CLEAN, cwd=project)
    assert clean.returncode == 0 and "All checks passed!" in clean.stdout


def test_ignore_dp001_like_any_rule(project):
    (project / "broken.py").write_text("class A(:\n    pass\n")
    assert codes(run_cli("broken.py", "--no-cache", "--output-format", "json", cwd=project)) == ["DP001"]
    proc = run_cli("broken.py", "--no-cache", "--ignore", "DP001", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nignore = ["DP001"]\n')
    assert run_cli("broken.py", "--no-cache", cwd=project).returncode == 0


def test_output_file_gets_the_report_and_stdout_stays_empty(project):
    (project / "bad.py").write_text(HAZARD)
    proc = run_cli("bad.py", "--no-cache", "-o", "out/report.json", "--output-format", "json", cwd=project)
    assert proc.returncode == 2  # the folder does not exist: a clear error, not a traceback
    assert "Traceback" not in proc.stderr and "report.json" in proc.stderr
    proc = run_cli("bad.py", "--no-cache", "--output-file", "report.json", "--output-format", "json", cwd=project)
    assert proc.returncode == 1 and proc.stdout == ""
    assert sorted(f["code"] for f in json.loads((project / "report.json").read_text())) == ["DP101", "DP301"]


def test_colour_always_never_and_never_for_json(project):
    (project / "bad.py").write_text(HAZARD)
    coloured = run_cli("bad.py", "--no-cache", "--color", "always", cwd=project).stdout
    assert "\x1b[1;31mDP101\x1b[0m" in coloured and "\x1b[1mbad.py\x1b[0m" in coloured
    assert "\x1b[1;31m" in run_cli("bad.py", "--no-cache", "--color", "always", "--output-format", "concise",
                                   cwd=project).stdout
    assert "\x1b[" not in run_cli("bad.py", "--no-cache", "--color", "never", cwd=project).stdout
    assert "\x1b[" not in run_cli("bad.py", "--no-cache", cwd=project).stdout  # auto, not a terminal
    as_json = run_cli("bad.py", "--no-cache", "--color", "always", "--output-format", "json", cwd=project)
    assert len(json.loads(as_json.stdout)) == 2 and "\x1b[" not in as_json.stdout


def test_colour_auto_follows_the_terminal_and_no_color(monkeypatch):
    from dpcheck.run import use_colour

    class Terminal:
        def isatty(self):
            return True

    class Pipe:
        def isatty(self):
            return False

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_colour("auto", "full", Terminal()) and not use_colour("auto", "full", Pipe())
    assert not use_colour("auto", "json", Terminal()) and not use_colour("always", "sarif", Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_colour("auto", "full", Terminal()) and use_colour("always", "full", Pipe())


def test_reader_leaving_early_is_not_an_error(project):
    """`dpcheck | head -1`: a closed pipe ends the output quietly, the exit code stays."""
    import subprocess
    import sys

    for i in range(150):  # far more output than a pipe buffers
        (project / f"m{i}.py").write_text(HAZARD)
    proc = subprocess.Popen([sys.executable, "-m", "dpcheck", ".", "--no-cache", "-j", "1"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1
    assert "Traceback" not in stderr and "error" not in stderr, stderr
