"""A bad file, link, folder or rule costs only its own result; killed runs leave no workers."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CLEAN, HAZARD, run_cli

from dpcheck import engine
from dpcheck.analysis import file as file_analysis
from dpcheck.discovery import discover
from dpcheck.registry import all_rules, rules_by_code

ALL_CODES = [r.code for r in all_rules()]
# An expression nested ~3,000 deep: CPython's parser raises RecursionError on it.
DEEP = "import torch\nx = " + "-" * 3000 + "1\n"


def _codes_by_file(data):
    out = {}
    for f in data:
        out.setdefault(Path(f["filename"]).name, set()).add(f["code"])
    return out


def _project_with_bad_files(project, copies=1):
    for i in range(copies):
        (project / f"bad{i}.py").write_text(HAZARD)
        (project / f"clean{i}.py").write_text(CLEAN)
    (project / "deep.py").write_text(DEEP)
    (project / "latin.py").write_bytes(b"import torch\nx = '\xff\xfe'\n")


@pytest.mark.parametrize("jobs", ["1", "4"])
def test_deeply_nested_file_costs_only_its_own_result(project, jobs):
    _project_with_bad_files(project, copies=10)  # 22 files: enough for the process pool with -j4
    for args in (["--no-cache"], [], []):  # sequential or parallel, then the cache written and read
        proc = run_cli(".", "-j", jobs, "--output-format", "json", *args, cwd=project)
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        by_file = _codes_by_file(json.loads(proc.stdout))
        assert by_file["deep.py"] == {"DP001"}
        assert by_file["latin.py"] == {"DP001"}
        assert all(by_file[f"bad{i}.py"] == {"DP101", "DP301"} for i in range(10))
        assert not any(f"clean{i}.py" in by_file for i in range(10))


def test_sarif_is_complete_when_a_file_fails(project):
    _project_with_bad_files(project)
    proc = run_cli(".", "--no-cache", "--output-format", "sarif", "--exit-zero", cwd=project)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"DP001", "DP101", "DP301"}


def test_parse_memory_error_is_dp001(monkeypatch):
    def boom(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(file_analysis.ast, "parse", boom)
    result = file_analysis.analyze_source(HAZARD, "m.py", [], "m")
    assert [f.code for f in result.findings] == ["DP001"]
    assert "MemoryError" in result.findings[0].message


def _break_rule(monkeypatch, code, exc_factory, only=None):
    cls = rules_by_code()[code]
    original = cls.check_class

    def check_class(self, model):
        if only is None or model.ctx.source.path.endswith(only):
            raise exc_factory()
        return original(self, model)

    monkeypatch.setattr(cls, "check_class", check_class)


@pytest.mark.parametrize("error", [RecursionError, MemoryError, KeyError])
@pytest.mark.parametrize("jobs", [1, 4])
def test_rule_failure_is_dp002_for_that_file_only(project, monkeypatch, error, jobs):
    for i in range(20):
        (project / f"bad{i}.py").write_text(HAZARD)
    _break_rule(monkeypatch, "DP101", error, only="bad3.py")
    paths = sorted(project.glob("*.py"))
    results, _ = engine.analyze_files(paths, ALL_CODES, jobs=jobs)  # forked workers inherit the patch
    run = engine.settle(results)
    by_file = {}
    for f in run.findings:
        by_file.setdefault(Path(f.filename).name, set()).add(f.code)
    assert by_file.pop("bad3.py") == {"DP002", "DP301"}  # the other rules still ran on it
    assert all(codes == {"DP101", "DP301"} for codes in by_file.values()) and len(by_file) == 19
    assert run.internal_error


def test_a_failure_settling_severity_costs_only_that_finding(project, monkeypatch):
    """Settling asks the class index whether a finding is advice only (nnsvs: a star-import cycle
    raised RecursionError there and the whole run ended with a traceback and no report). The
    finding keeps its severity, its file gets a DP002, the other files settle as before."""
    from dpcheck.analysis.index import ClassIndex

    for i in range(3):
        (project / f"bad{i}.py").write_text(HAZARD)
    settling: list[str] = []
    unwrapped, settle_file = ClassIndex.unwrapped, engine.RunResult.settle_file

    def fragile(self, class_name):
        if settling[-1].endswith("bad1.py"):
            raise RecursionError("maximum recursion depth exceeded")
        return unwrapped(self, class_name)

    def tracked(self, filename, findings):
        settling.append(filename)
        return settle_file(self, filename, findings)

    monkeypatch.setattr(ClassIndex, "unwrapped", fragile)
    monkeypatch.setattr(engine.RunResult, "settle_file", tracked)
    results, _ = engine.analyze_files(sorted(project.glob("*.py")), ALL_CODES, jobs=1)
    run = engine.settle(results)
    by_file: dict = {}
    for f in run.findings:
        by_file.setdefault(Path(f.filename).name, []).append((f.code, f.severity))
    failed = by_file.pop("bad1.py")
    assert ("DP002", "error") in failed and sorted(set(failed)) == [
        ("DP002", "error"), ("DP101", "error"), ("DP301", "error")]
    assert all(sorted(codes) == [("DP101", "error"), ("DP301", "error")] for codes in by_file.values())
    assert len(by_file) == 2 and run.internal_error
    assert "how severe DP101 is: RecursionError" in " ".join(f.message for f in run.findings if f.code == "DP002")


def test_a_worker_that_dies_costs_only_its_file(project, monkeypatch):
    for i in range(40):
        (project / f"bad{i:02}.py").write_text(HAZARD)
    _break_rule(monkeypatch, "DP101", lambda: os._exit(3), only="bad07.py")
    paths = sorted(project.glob("*.py"))
    results, _ = engine.analyze_files(paths, ALL_CODES, jobs=4)
    codes = {Path(r.filename).name: {f.code for f in r.findings} for r in results}
    assert codes.pop("bad07.py") == {"DP002"}
    assert len(codes) == 39 and all(c == {"DP101", "DP301"} for c in codes.values())


def test_internal_error_still_prints_a_complete_document(project, monkeypatch, capsys):
    """A writer failing on one finding: the rest is printed as valid JSON, and the exit is 2."""
    from dpcheck.report import structured
    from dpcheck.run import CheckOptions, run_check

    (project / "a.py").write_text(HAZARD)
    (project / "b.py").write_text(HAZARD)
    real = structured.finding_json

    def fragile(finding, report):
        if finding.filename.endswith("a.py") and finding.code == "DP301":
            raise ValueError("cannot write this one")
        return real(finding, report)

    monkeypatch.setattr(structured, "finding_json", fragile)
    monkeypatch.chdir(project)
    code = run_check(CheckOptions(paths=[Path(".")], output_format="json", no_cache=True, jobs=1))
    out, err = capsys.readouterr()
    assert code == 2
    data = json.loads(out)
    assert sorted((Path(f["filename"]).name, f["code"]) for f in data) == [
        ("a.py", "DP101"), ("b.py", "DP101"), ("b.py", "DP301")]
    assert "cannot write DP301" in err


def test_symlink_loops_do_not_stop_discovery(project):
    (project / "m.py").write_text(HAZARD)
    (project / "sub").mkdir()
    (project / "sub" / "n.py").write_text(HAZARD)
    os.symlink("..", project / "sub" / "loop")       # sub/loop -> ..
    os.symlink("b", project / "a")                   # a -> b -> a
    os.symlink("a", project / "b")
    os.symlink("y.py", project / "x.py")             # x.py -> y.py -> x.py
    os.symlink("x.py", project / "y.py")
    warnings = []
    found = sorted(p.relative_to(project).as_posix()
                   for p in discover([project], project, [], warn=warnings.append))
    assert found == ["m.py", "sub/n.py"]
    proc = run_cli(".", "--no-cache", "--output-format", "json", cwd=project)
    assert proc.returncode == 1, proc.stderr
    assert len(json.loads(proc.stdout)) == 4


def test_unreadable_folder_is_reported_and_skipped(project, monkeypatch):
    (project / "ok.py").write_text(HAZARD)
    locked = project / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text(HAZARD)
    real_scandir = os.scandir

    def scandir(path):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    # Tests often run as root, for whom permission bits mean nothing: fail the listing directly.
    monkeypatch.setattr("dpcheck.discovery.os.scandir", scandir)
    warnings = []
    found = [p.name for p in discover([project], project, [], warn=warnings.append)]
    assert found == ["ok.py"]
    assert len(warnings) == 1 and "locked" in warnings[0] and "Permission denied" in warnings[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifos_and_devices_are_never_opened(project):
    (project / "ok.py").write_text(HAZARD)
    os.mkfifo(project / "pipe.py")
    os.symlink("/dev/zero", project / "zero.py")
    # Named on the command line or met in a walk: skipped with a warning, never read (a
    # read would block forever on the FIFO; the time limit turns that into a failure).
    proc = run_cli(".", "pipe.py", "zero.py", "--no-cache", "--output-format", "json", cwd=project, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert [Path(f["filename"]).name for f in json.loads(proc.stdout)] == ["ok.py", "ok.py"]
    assert "pipe.py: not a regular file" in proc.stderr and "zero.py: not a regular file" in proc.stderr
    # And a FIFO that becomes due for reading anyway is refused, not waited on.
    result = file_analysis.analyze_path(project / "pipe.py", "pipe.py", [])
    assert [f.code for f in result.findings] == ["DP001"] and "regular file" in result.findings[0].message


def test_undecodable_stdin_and_file_names_are_printed(project):
    proc = subprocess.run([sys.executable, "-m", "dpcheck", "-", "--no-cache"], cwd=project,
                          input=b"import torch\nx = '\xff'\n", capture_output=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert b"DP001" in proc.stdout and b"Traceback" not in proc.stderr
    (project / os.fsdecode(b"\xff.py")).write_text(HAZARD)
    proc = subprocess.run([sys.executable, "-m", "dpcheck", ".", "--no-cache"], cwd=project,
                          capture_output=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert b"\xff.py:" in proc.stdout and b"Traceback" not in proc.stderr


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_die_with_their_parent(tmp_path, sig):
    heldout = Path(__file__).parent / "heldout"
    sources = [p.read_text() for p in sorted(heldout.glob("*.py"))]
    for i in range(600):
        (tmp_path / f"m{i:04}.py").write_text(sources[i % len(sources)])
    parent = subprocess.Popen([sys.executable, "-m", "dpcheck", ".", "-j", "4", "--no-cache", "--exit-zero"],
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        workers = []
        while len(workers) < 4 and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.05)
            workers = _children(parent.pid)
        assert len(workers) >= 4, "the run ended before its workers could be seen"
        parent.send_signal(sig)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 30
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [w for w in workers if _alive(w)]
    finally:
        for w in _children(parent.pid) if parent.poll() is None else []:
            os.kill(w, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
