"""What keeps --confirm cheap without changing what it records: the model file's imports run
untraced, and the processes that run models let idle OpenMP threads sleep."""

import json
import subprocess
import sys
import textwrap

_PROBE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from dpcheck.harness.child import load_module
    from dpcheck.harness.runner import install_tracer, trace_lines, untraced_imports
    tracer, executed, _, _ = trace_lines(sys.argv[1] + "/model_file.py")
    foreign = []
    def counting(frame, event, arg):
        if frame.f_code.co_filename.endswith("helper_lib.py"):
            foreign.append(frame.f_code.co_name)
        return tracer(frame, event, arg)
    install_tracer(counting)
    with untraced_imports(counting):
        model_file = load_module(Path(sys.argv[1]) / "model_file.py")  # as the child imports it
    sys.settrace(None)
    print(json.dumps({"executed": sorted(executed), "foreign": foreign, "value": model_file.VALUE}))
""")


def test_imports_of_the_model_file_run_untraced_and_its_lines_are_still_recorded(tmp_path):
    (tmp_path / "helper_lib.py").write_text("def helper():\n    return 2\n\n\nTWO = helper()\n")
    (tmp_path / "model_file.py").write_text(
        "A = 1\n"
        "import helper_lib\n"
        "from helper_lib import helper\n"
        "VALUE = A + helper_lib.TWO\n"
        "def later():\n"
        "    return helper() + 1\n"
        "VALUE += later()\n")
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, check=True)
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["value"] == 6
    assert seen["executed"] == [0, 1, 2, 3, 4, 5, 6, 7]  # every line of the model file, after each import too
    # helper_lib's module code ran inside an import statement: the tracer never saw it; its
    # function called from the model file's own code (not an import) still is traced as before.
    assert "<module>" not in seen["foreign"]
    assert seen["foreign"] == ["helper"]


def test_model_processes_let_openmp_threads_sleep_unless_the_user_chose(monkeypatch):
    from dpcheck.harness.processes import child_environment

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert child_environment()["OMP_WAIT_POLICY"] == "PASSIVE"
    assert child_environment(PYTHONDONTWRITEBYTECODE="1")["PYTHONDONTWRITEBYTECODE"] == "1"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert child_environment()["OMP_WAIT_POLICY"] == "ACTIVE"


def test_model_processes_share_the_cores_among_the_files_run_at_once(monkeypatch):
    from dpcheck.harness.processes import child_environment

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(16)))
    assert child_environment(1)["OMP_NUM_THREADS"] == "16"
    assert child_environment(4)["OMP_NUM_THREADS"] == "4"
    assert child_environment(18)["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert child_environment(4)["OMP_NUM_THREADS"] == "3"
