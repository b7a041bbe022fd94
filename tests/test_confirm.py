"""`dpcheck --confirm` on the emulated backend (no GPU needed), end to end through the CLI.

The same fixtures run on real GPUs in tests/test_gpu.py, which checks that both backends
give the same verdicts.
"""

import json
import re
import textwrap

import pytest
from conftest import ROOT, fixture_files, run_cli

torch = pytest.importorskip("torch")

EXPECT = re.compile(r"#\s*confirm-expect(?P<cuda>-cuda)?:\s*(?P<codes>DP\d{3}(?:\s*,\s*DP\d{3})*)")


def confirm(*paths, backend="emulated", extra=(), timeout=300):
    proc = run_cli(*paths, "--confirm", "--backend", backend, "--output-format", "json", "--no-cache",
                   "--select", "ALL", "--ignore", "DP708", *extra, timeout=timeout)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def fixture_results():
    """One --confirm run over every fixture (the expensive part, shared by the tests below).

    Its time grows with the fixtures (the whole of this file took about 2.5 minutes on a quiet
    2-core machine in session 38) and with the machine's load; it timed out at 300 s under load 26,
    so it gets the time CI can spare."""
    return confirm("fixtures", timeout=1200)


def by_file(results):
    grouped = {}
    for f in results:
        grouped.setdefault(f["filename"].removeprefix(str(ROOT) + "/"), []).append(f)
    return grouped


def expected_dynamic(path, backend="emulated"):
    codes = set()
    for match in EXPECT.finditer(path.read_text()):
        if match.group("cuda") and backend != "cuda":
            continue
        codes |= set(re.split(r"\s*,\s*", match.group("codes")))
    return codes


def test_every_finding_carries_a_confirmation(fixture_results):
    assert fixture_results
    for f in fixture_results:
        c = f["confirmation"]
        assert c["status"] in ("confirmed", "not-reproduced", "not-run"), f
        assert c["evidence"] and c["backend"]


def test_every_hazard_fixture_with_an_example_is_confirmed(fixture_results):
    grouped = by_file(fixture_results)
    for path in fixture_files("flagged_*.py"):
        text = path.read_text()
        if "def dpcheck_example" not in text or "confirm-expect-cuda" in text or "confirm-skip" in text:
            continue
        rel = path.relative_to(ROOT).as_posix()
        statuses = [f["confirmation"]["status"] for f in grouped.get(rel, [])]
        assert "confirmed" in statuses, f"{rel}: nothing confirmed ({grouped.get(rel)})"


def test_safe_fixtures_stay_clean_under_confirm(fixture_results):
    grouped = by_file(fixture_results)
    for path in fixture_files("safe_*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if "confirm-skip" in path.read_text():
            continue  # not comparable under --confirm (the marker says why)
        assert grouped.get(rel, []) == [], f"{rel}: {grouped.get(rel)}"


def test_dynamic_findings_are_exactly_the_expected_ones(fixture_results):
    grouped = by_file(fixture_results)
    for path in fixture_files():
        rel = path.relative_to(ROOT).as_posix()
        if "confirm-skip" in path.read_text():
            continue  # its outcome depends on thread timing (the marker says why)
        dynamic = {f["code"] for f in grouped.get(rel, []) if f["code"].startswith("DP8")}
        assert dynamic == expected_dynamic(path), rel


def test_confirmed_evidence_names_what_happened(fixture_results):
    grouped = by_file(fixture_results)
    steps = next(f for f in grouped["fixtures/dp101/flagged_counter_and_stash.py"] if f["location"]["row"] == 13)
    assert steps["confirmation"]["status"] == "confirmed"
    assert "`steps` is 0 on the model and 1 in the single-device run" in steps["confirmation"]["evidence"]
    assert steps["confirmation"]["backend"].startswith("emulated")
    scalar = next(f for f in grouped["fixtures/dp401/flagged_scalar_losses.py"] if f["location"]["row"] == 13)
    assert "returned shape (2,)" in scalar["confirmation"]["evidence"]


def test_text_output_prints_the_evidence():
    proc = run_cli("fixtures/dp101/flagged_counter_and_stash.py", "--confirm", "--backend", "emulated",
                   "--no-cache")
    assert "= confirmed (emulated, 2 devices): after one DataParallel forward on 2 devices" in proc.stdout


# A runnable model with a lost-state hazard (DP101 on `steps`), and room for what its
# constructor and forward do besides.
RUNNABLE = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.steps = 0
            {init}

        def forward(self, x):
            self.steps += 1
            {forward}
            return self.fc(x)

    def dpcheck_example(batch_size=4):
        return Net(), (torch.randn(batch_size, 4),)
''')


def test_models_that_raise_hang_or_exit_are_not_run_and_others_still_checked(project):
    (project / "raises.py").write_text(RUNNABLE.format(init="raise RuntimeError('no weights here')", forward=""))
    (project / "hangs.py").write_text(RUNNABLE.format(init="", forward="import time; time.sleep(60)"))
    (project / "exits.py").write_text(RUNNABLE.format(init="import sys; sys.exit(3)", forward=""))
    (project / "good.py").write_text(RUNNABLE.format(init="", forward=""))
    proc = run_cli(".", "--confirm", "--backend", "emulated", "--timeout", "20", "--output-format", "json",
                   "--no-cache", cwd=project)
    results = {f["filename"].rsplit("/", 1)[-1]: f["confirmation"] for f in json.loads(proc.stdout)
               if f["code"] == "DP101"}
    assert results["good.py"]["status"] == "confirmed"
    assert results["raises.py"]["status"] == "not-run" and "no weights here" in results["raises.py"]["evidence"]
    assert results["hangs.py"]["status"] == "not-run" and "did not finish within 20 s" in results["hangs.py"]["evidence"]
    assert results["exits.py"]["status"] == "not-run" and "sys.exit" in results["exits.py"]["evidence"]
    # Each file that could not be compared says so once, at file level; the good one does not.
    not_run = sorted(f["filename"].rsplit("/", 1)[-1] for f in json.loads(proc.stdout) if f["code"] == "DP003")
    assert not_run == ["exits.py", "hangs.py", "raises.py"]


def test_a_model_that_dies_or_prints_costs_only_its_own_result(project):
    # Each file runs in a process of its own (forked from a warm server on the emulation): a
    # model killed by a signal or leaving through os._exit is not-run with the reason, and
    # what models print never reaches dpcheck's own output.
    (project / "killed.py").write_text(RUNNABLE.format(init="", forward="import os; os.kill(os.getpid(), 9)"))
    (project / "leaves.py").write_text(RUNNABLE.format(init="", forward="import os; os._exit(7)"))
    noise = "import os, sys; print('{\"not\": 1}'); sys.stdout.write('noise'); os.write(1, b'raw')"
    (project / "chatty.py").write_text(RUNNABLE.format(init="", forward=noise))
    proc = run_cli(".", "--confirm", "--backend", "emulated", "--timeout", "60", "--output-format", "json",
                   "--no-cache", cwd=project)
    findings = json.loads(proc.stdout)  # nothing the models printed broke the report
    results = {f["filename"].rsplit("/", 1)[-1]: f["confirmation"] for f in findings if f["code"] == "DP101"}
    assert results["chatty.py"]["status"] == "confirmed"
    assert results["killed.py"]["status"] == "not-run" and "signal 9" in results["killed.py"]["evidence"]
    assert results["leaves.py"]["status"] == "not-run" and "status 7" in results["leaves.py"]["evidence"]


def test_killing_dpcheck_ends_the_models_it_runs(project):
    import os
    import signal
    import subprocess
    import sys
    import time

    (project / "hangs.py").write_text(textwrap.dedent('''
        import os, time
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                with open("model.pid", "w") as f:
                    f.write(str(os.getpid()))
                time.sleep(120)
                return self.fc(x)

        def dpcheck_example(batch_size=4):
            return Net(), (torch.randn(batch_size, 4),)
    '''))
    proc = subprocess.Popen([sys.executable, "-m", "dpcheck", "hangs.py", "--confirm", "--backend", "emulated",
                             "--no-cache", "--timeout", "300"], cwd=project, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    pid_file = project / "model.pid"
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, "the model never started"
        time.sleep(0.2)
    model_pid = int(pid_file.read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(model_pid, 0)
        except ProcessLookupError:
            return
        if _is_zombie(model_pid):
            return
        time.sleep(0.2)
    os.kill(model_pid, signal.SIGKILL)
    raise AssertionError("the model kept running after dpcheck was killed")


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_file_that_could_not_be_compared_is_never_reported_clean(project):
    # No static finding at all: before, --confirm printed "All checks passed!" and exited 0.
    (project / "wrapper.py").write_text(textwrap.dedent('''
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)

        def dpcheck_example(batch_size=4):
            raise RuntimeError("weights not downloaded")
    '''))
    args = ("wrapper.py", "--confirm", "--backend", "emulated", "--no-cache", "--timeout", "300")
    for fmt in ("full", "concise", "json", "json-lines", "sarif", "github"):
        proc = run_cli(*args, "--output-format", fmt, cwd=project)
        assert proc.returncode == 1, (fmt, proc.stdout, proc.stderr)
        assert "All checks passed!" not in proc.stdout, fmt
        assert "DP003" in proc.stdout and "weights not downloaded" in proc.stdout, (fmt, proc.stdout)
    assert run_cli(*args, "--exit-zero", cwd=project).returncode == 0
    # Without --confirm nothing was run, so nothing is claimed either way.
    assert "DP003" not in run_cli("wrapper.py", "--no-cache", cwd=project).stdout


# A model with no arguments whose forward keeps a call count (DP101, confirmed when it runs).
COUNTING_NET = '''
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                return self.fc(x)
'''


def test_synthesized_inputs_and_missing_examples(project):
    (project / "synth.py").write_text(textwrap.dedent('''
        import torch.nn as nn
''' + COUNTING_NET + '''
        class NeedsArgs(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.fc = nn.Linear(width, width)
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                return self.fc(x)
    '''))
    results = json.loads(run_cli("synth.py", "--confirm", "--backend", "emulated", "--output-format", "json",
                                 "--no-cache", cwd=project).stdout)
    by_row = {f["location"]["row"]: f["confirmation"] for f in results}
    assert by_row[11]["status"] == "confirmed"
    assert by_row[21]["status"] == "not-run" and "needs arguments (width)" in by_row[21]["evidence"]


def _confirmed_findings(project, paths: tuple[str, ...], reported_in: str) -> list[dict]:
    """Run `--confirm` on the emulation over ``paths``; assert no file got DP003 and every finding
    in the file whose name ends with ``reported_in`` (there is one) was confirmed; return those."""
    results = json.loads(run_cli(*paths, "--confirm", "--backend", "emulated", "--output-format", "json",
                                 "--no-cache", cwd=project).stdout)
    assert not [f for f in results if f["code"] == "DP003"], results
    findings = [f for f in results if f["filename"].endswith(reported_in)]
    assert findings and all(f["confirmation"]["status"] == "confirmed" for f in findings), findings
    return findings


def test_a_dataparallel_subclass_is_a_wrapper_not_a_model_to_run(project):
    # The harness wraps each model in DataParallel itself; a project's subclass of it needs the
    # model it wraps and is not one: a file of wrappers only has nothing to run (no DP003), and
    # next to a model only the model runs.
    wrapper = '''
        import torch.nn as nn

        class PatchedDataParallel(nn.DataParallel):
            def __getattr__(self, name):
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    return getattr(self.module, name)
    '''
    (project / "parallel.py").write_text(textwrap.dedent(wrapper))
    (project / "both.py").write_text(textwrap.dedent(wrapper + COUNTING_NET))
    findings = _confirmed_findings(project, ("parallel.py", "both.py"), "both.py")
    assert all("PatchedDataParallel" not in f["confirmation"]["evidence"] for f in findings)


def test_a_base_class_without_forward_is_not_a_model_to_run(project):
    # A base class that defines no forward (its subclasses do) raises NotImplementedError on any
    # device: it is not run, so a file of such bases has nothing to run (no DP003), and next to a
    # model only the model runs.
    base = '''
        import torch.nn as nn

        class ModelBase(nn.Module):
            @property
            def device(self):
                return next(self.parameters()).device
    '''
    (project / "base.py").write_text(textwrap.dedent(base))
    (project / "both.py").write_text(textwrap.dedent(base + '''
        class Net(ModelBase):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x.to(self.device))
    '''))
    findings = _confirmed_findings(project, ("base.py", "both.py"), "both.py")
    assert all("ModelBase" not in f["confirmation"]["evidence"] for f in findings)


def test_a_model_in_a_package_init_is_imported_under_the_package_name(project):
    # `src/pkg/__init__.py` is the module `pkg`, imported from the folder above `pkg/` (here not
    # the working folder); a model there runs like any other file's.
    package = project / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "layers.py").write_text("import torch.nn as nn\n\nWIDTH = 4\n")
    (package / "__init__.py").write_text(textwrap.dedent('''
        import torch.nn as nn

        from pkg.layers import WIDTH

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(WIDTH, WIDTH)
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                return self.fc(x)
    '''))
    _confirmed_findings(project, ("src/pkg",), "__init__.py")


def test_examples_and_timeout_come_from_each_files_own_configuration(project):
    # Two packages of one repository, each with its own configuration naming its own examples
    # file: run from the root (whose configuration names none), each file uses its own.
    model = textwrap.dedent('''
        import torch.nn as nn

        class {name}(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.fc = nn.Linear(width, width)
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                return self.fc(x)
    ''')
    for package, name, timeout in (("vision", "Encoder", 120), ("speech", "Decoder", 0.01)):
        folder = project / package
        folder.mkdir()
        (folder / "model.py").write_text(model.format(name=name))
        (folder / "examples.py").write_text(textwrap.dedent(f'''
            import torch
            from model import {name}

            def dpcheck_example_{name}(batch_size):
                return {name}(4), (torch.randn(batch_size, 4),)
        '''))
        (folder / "pyproject.toml").write_text(f'[tool.dpcheck]\nexamples = "examples.py"\ntimeout = {timeout}\n')
    (project / "pyproject.toml").write_text("[tool.dpcheck]\n")
    results = json.loads(run_cli(".", "--confirm", "--backend", "emulated", "--output-format", "json",
                                 "--no-cache", cwd=project).stdout)
    by_file = {}
    for f in results:
        by_file.setdefault(f["filename"].split("/")[-2], []).append(f)
    vision = [f for f in by_file["vision"] if f["code"] == "DP101"]
    assert vision and all(f["confirmation"]["status"] == "confirmed" for f in vision), vision
    # speech's own timeout (0.01 s) applies to speech only: its file was not run.
    speech = by_file["speech"]
    assert any(f["code"] == "DP003" and "0.01 s" in f["confirmation"]["evidence"] for f in speech), speech


def test_python_api():
    from dpcheck.harness import assert_dataparallel_safe, check

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.steps = 0

        def forward(self, x):
            self.steps += 1
            return self.fc(x)

    report = check(Counter(), (torch.randn(8, 4),), backend="emulated")
    assert any("`steps` is 0" in o.evidence for o in report.observations)
    assert_dataparallel_safe(torch.nn.Sequential(torch.nn.Linear(4, 4)), (torch.randn(8, 4),), backend="emulated")
    with pytest.raises(AssertionError, match="not DataParallel-safe"):
        assert_dataparallel_safe(Counter(), (torch.randn(8, 4),), backend="emulated")


def test_the_gpu_comparison_leaves_out_the_dynamic_codes_of_confirm_skip_fixtures_only():
    from test_gpu import verdicts

    def finding(path, code, row=1):
        return {"filename": str(ROOT / path), "code": code, "location": {"row": row, "column": 1},
                "confirmation": {"status": "confirmed"}}
    racy = "fixtures/dp105/flagged_hooks_in_forward.py"  # first line: `# confirm-skip: a race ...`
    assert (ROOT / racy).read_text().startswith("# confirm-skip:")
    static, dynamic = verdicts([finding(racy, "DP807"), finding(racy, "DP105", 12),
                                finding("fixtures/dp101/flagged_counter_and_stash.py", "DP801")])
    assert dynamic == {"fixtures/dp101/flagged_counter_and_stash.py": {"DP801"}}
    assert static == {(racy, 12, 1, "DP105"): "confirmed"}  # its static verdicts are still compared


def test_lines_that_run_only_in_eval_mode_are_confirmed_by_the_eval_pass(fixture_results):
    # Before the eval pass, `self.eval_calls += 1` under `if not self.training:` never ran: not-run.
    grouped = by_file(fixture_results)
    [counter] = grouped["fixtures/dp101/flagged_eval_only_counter.py"]
    c = counter["confirmation"]
    assert c["status"] == "confirmed", c
    assert "`eval_calls`" in c["evidence"] and "(in eval mode)" in c["evidence"], c
    assert c["modes"] == ["training", "eval"]
    # A 0-dim output returned only in eval mode: its own probe (the output's shape) confirms it.
    [score] = grouped["fixtures/dp401/flagged_eval_only_score.py"]
    assert score["code"] == "DP401" and score["confirmation"]["status"] == "confirmed", score
    assert "0-dim" in score["confirmation"]["evidence"] and "(in eval mode)" in score["confirmation"]["evidence"]
    assert not grouped.get("fixtures/dp401/safe_eval_only_per_sample_score.py")
    # A training-mode hazard is confirmed by the training run: its evidence names no mode.
    steps = next(f for f in grouped["fixtures/dp101/flagged_counter_and_stash.py"] if f["location"]["row"] == 13)
    assert "(in eval mode)" not in steps["confirmation"]["evidence"]
    assert steps["confirmation"]["modes"] == ["training", "eval"]


def test_text_and_sarif_say_which_modes_ran():
    path = "fixtures/dp101/flagged_eval_only_counter.py"
    text = run_cli(path, "--confirm", "--backend", "emulated", "--no-cache").stdout
    assert "[ran in training and eval mode]" in text, text
    sarif = json.loads(run_cli(path, "--confirm", "--backend", "emulated", "--no-cache",
                               "--output-format", "sarif").stdout)
    [result] = sarif["runs"][0]["results"]
    assert result["properties"]["confirmation"]["modes"] == ["training", "eval"]


def _run(example):
    from dpcheck.harness.runner import make_backend, run_model
    return run_model(example, make_backend("emulated", 2), [4])


class _EvalOnly(torch.nn.Module):
    """Counts eval calls (lost on a replica), or raises in eval mode when told to."""

    def __init__(self, eval_raises=False):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.eval_calls = 0
        self.eval_raises = eval_raises

    def forward(self, x):
        if not self.training:
            if self.eval_raises:
                raise RuntimeError("no eval path")
            self.eval_calls += 1
        return self.fc(x)


def test_the_eval_pass_runs_after_training_only():
    training = _run(lambda b: (_EvalOnly(), (torch.randn(b, 4),)))
    assert training.modes == ["training", "eval"] and training.mode == "training"
    lost = [o for o in training.observations if o.attr == "eval_calls"]
    assert [(o.mode, o.batch) for o in lost] == [("eval", 4)] and lost[0].evidence.endswith("(in eval mode)")
    assert all(o.mode == "training" for o in training.observations if o.attr != "eval_calls")
    # An example that returns eval() asked for eval only: one pass, its observations not marked.
    evaluating = _run(lambda b: (_EvalOnly().eval(), (torch.randn(b, 4),)))
    assert evaluating.modes == ["eval"]
    [obs] = [o for o in evaluating.observations if o.attr == "eval_calls"]
    assert obs.mode == "eval" and "(in eval mode)" not in obs.evidence


def test_an_eval_pass_that_fails_is_a_note_and_training_verdicts_stand(project):
    report = _run(lambda b: (_EvalOnly(eval_raises=True), (torch.randn(b, 4),)))
    assert report.compared == [4] and report.modes == ["training", "eval"]
    assert not report.reference_failures and not report.errors
    assert any("eval pass" in n and "no eval path" in n for n in report.notes), report.notes
    # Through the CLI: the training-mode hazard is still confirmed, and no file-level not-run.
    (project / "model.py").write_text(RUNNABLE.format(
        init="self.eval_raises = True", forward="if not self.training: raise RuntimeError('no eval path')"))
    results = json.loads(run_cli("model.py", "--confirm", "--backend", "emulated", "--no-cache",
                                 "--output-format", "json", cwd=project).stdout)
    assert "DP003" not in {f["code"] for f in results}, results
    steps = [f for f in results if f["code"] == "DP101"]
    assert steps and steps[0]["confirmation"]["status"] == "confirmed", results
