"""The result cache and parallel workers change speed, never results."""

import json

from conftest import HAZARD, run_cli

BASE = "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n"
PLAIN_BASE = "class Base:\n    pass\n"
CHILD = ("from .base import Base\n\n\nclass Child(Base):\n    def forward(self, x):\n"
         "        self.last = x\n        return x\n")


def findings(project, *args):
    proc = run_cli(".", "--output-format", "json", *args, cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["code"]) for f in json.loads(proc.stdout))


def make_package(project):
    pkg = project / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text(BASE)
    (pkg / "child.py").write_text(CHILD)
    return pkg


def test_warm_run_equals_cold_run_and_uses_the_cache_dir(project):
    make_package(project)
    (project / "model.py").write_text(HAZARD)
    cold = findings(project, "--no-cache")
    assert not (project / ".dpcheck_cache").exists()
    first = findings(project, "--cache-dir", "cache")
    assert list((project / "cache").glob("results-*.json"))
    second = findings(project, "--cache-dir", "cache")
    assert cold == first == second
    assert ("child.py", 6, "DP101") in cold


def test_changed_file_is_rechecked(project):
    (project / "model.py").write_text(HAZARD)
    assert len(findings(project)) == 2
    (project / "model.py").write_text(HAZARD.replace("self.steps += 1", "pass"))
    assert [f[2] for f in findings(project)] == ["DP301"]


def test_base_class_change_in_another_file_reaches_cached_subclass(project):
    pkg = make_package(project)
    assert findings(project) == [("child.py", 6, "DP101")]
    (pkg / "base.py").write_text(PLAIN_BASE)  # Base is no longer an nn.Module
    assert findings(project) == []
    (pkg / "base.py").write_text(BASE)
    assert findings(project) == [("child.py", 6, "DP101")]


def test_corrupt_or_foreign_cache_is_ignored(project):
    (project / "model.py").write_text(HAZARD)
    expected = findings(project)
    cache_files = list((project / ".dpcheck_cache").glob("*.json"))
    assert {f.name.split("-")[0] for f in cache_files} == {"results", "settled"}
    for cache_file in cache_files:
        cache_file.write_text("{not json")
    assert findings(project) == expected
    for pattern, malform in (("results-*.json", _malformed_entries), ("settled-*.json", _malformed_findings)):
        for cache_file in (project / ".dpcheck_cache").glob(pattern):
            header, body = cache_file.read_text().split("\n", 1)  # a header line (tool, version, ...)
            data = json.loads(body)
            malform(data)
            cache_file.write_text(f"{header}\n{json.dumps(data)}")
    assert findings(project) == expected


def _malformed_entries(data):
    for entry in data["entries"].values():
        entry["result"]["findings"] = [{"code": "DP999"}]  # malformed entry, right hash


def _malformed_findings(data):
    data["findings"] = [{"code": "DP999"}]  # malformed settled run, right inputs


def test_settled_run_follows_modules_outside_the_scanned_files(project):
    """A run whose scanned files are unchanged is read back settled only while the modules the
    class index looked for outside them are unchanged too: here the base class of the one
    scanned file is missing, then appears, then changes."""
    pkg = make_package(project)

    def child_findings():
        proc = run_cli("pkg/child.py", "--output-format", "concise", "--cache-dir", "cache", cwd=project)
        assert proc.returncode in (0, 1), proc.stderr
        return [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("pkg/")]

    (pkg / "base.py").unlink()
    assert child_findings() == []
    assert child_findings() == []
    (pkg / "base.py").write_text(BASE)  # a module the index found no file for is there now
    assert child_findings() == ["DP101"]
    assert child_findings() == ["DP101"]
    (pkg / "base.py").write_text(PLAIN_BASE)  # Base is no longer an nn.Module
    assert child_findings() == []


def test_settled_run_follows_per_file_ignores(project):
    (project / "model.py").write_text(HAZARD)
    assert [f[2] for f in findings(project)] == ["DP101", "DP301"]
    (project / "pyproject.toml").write_text('[tool.dpcheck]\nper-file-ignores = {"model.py" = ["DP101"]}\n')
    assert [f[2] for f in findings(project)] == ["DP301"]


def test_unchanged_run_is_not_settled_again(project, monkeypatch, capsys):
    """Nothing changed since the last run: its settled findings are read back, the per-file
    results and the cross-file phase are not (in process, so the engine can be watched)."""
    from dpcheck import engine
    from dpcheck.run import CheckOptions, run_check

    make_package(project)
    (project / "model.py").write_text(HAZARD)
    monkeypatch.chdir(project)
    options = CheckOptions(paths=[project], output_format="concise", cache_dir=project / "cache", exit_zero=True)
    run_check(options)
    first = capsys.readouterr().out

    def no_settling(*args, **kwargs):
        raise AssertionError("settled again")

    monkeypatch.setattr(engine, "settle", no_settling)
    monkeypatch.setattr(engine, "analyze_selected", no_settling)
    run_check(options)
    assert capsys.readouterr().out == first
    assert "DP101" in first and "child.py" in first


def test_parallel_workers_give_the_same_findings(project):
    make_package(project)
    for i in range(40):
        (project / f"m{i}.py").write_text(HAZARD if i % 2 else "x = 1\n")
    serial = findings(project, "--no-cache", "--jobs", "1")
    parallel = findings(project, "--no-cache", "--jobs", "2")
    assert serial == parallel
    assert len(serial) == 41


def test_file_without_torch_still_links_a_base_chain(project):
    pkg = make_package(project)
    # mid.py mentions no torch, no forward: it is not checked, but its class still counts.
    (pkg / "mid.py").write_text("from .base import Base\n\n\nclass Mid(Base):\n    pass\n")
    (pkg / "leaf.py").write_text(CHILD.replace("from .base import Base", "from .mid import Mid")
                                 .replace("Child(Base)", "Leaf(Mid)"))
    assert ("leaf.py", 6, "DP101") in findings(project, "--no-cache")


def test_pool_results_come_back_in_input_order(tmp_path):
    """Workers take the largest files first; the results still come back in the order asked."""
    from dpcheck import engine
    from dpcheck.registry import select_rules

    paths = []
    for i in range(40):  # sizes grow with i: the pool's order is the reverse of the input's
        path = tmp_path / f"m{i:02d}.py"
        path.write_text(HAZARD + "\n" * i * 50 if i % 3 else "x = 1\n" * (i + 1))
        paths.append(path)
    codes = [r.code for r in select_rules(None, [], [])]
    parallel, _ = engine.analyze_files(paths, codes, jobs=2)
    serial, _ = engine.analyze_files(paths, codes, jobs=1)
    assert [r.filename for r in parallel] == [str(p) for p in paths]
    assert [r.to_dict() for r in parallel] == [r.to_dict() for r in serial]
    assert sum(len(r.findings) for r in parallel) > 0

def test_code_fingerprint_covers_subpackages(tmp_path):
    """An edit to a module in a subpackage (dpcheck/analysis/ holds most facts) changes the
    cache key, so a development install is never served results of the previous code."""
    import os
    import types

    from dpcheck.cache import _code_fingerprint

    (tmp_path / "analysis").mkdir()
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "analysis" / "__init__.py").write_text("")
    (tmp_path / "top.py").write_text("x = 1\n")
    nested = tmp_path / "analysis" / "facts.py"
    nested.write_text("y = 1\n")
    package = types.SimpleNamespace(__path__=[str(tmp_path)])
    before = _code_fingerprint([package])
    nested.write_text("y = 22\n")
    assert _code_fingerprint([package]) != before
    stamp = nested.stat().st_mtime_ns
    before = _code_fingerprint([package])
    os.utime(nested, ns=(stamp + 10**9, stamp + 10**9))
    assert _code_fingerprint([package]) != before
    before = _code_fingerprint([package])
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "stale.py").write_text("")
    assert _code_fingerprint([package]) == before  # bytecode caches are not code


def test_code_fingerprint_walks_only_dpcheck_packages(monkeypatch):
    """In a source checkout dpcheck's ``__path__`` also names the checkout's root (for
    ../rules): the fingerprint must not walk that folder's virtual environment, corpora or
    tests (it did, and that was most of a cached run's time), only dpcheck's packages."""
    import os

    import dpcheck.rules

    import dpcheck
    from dpcheck.cache import _code_fingerprint

    walked = []
    real_scandir = os.scandir

    def scandir(folder):
        walked.append(os.path.realpath(folder))
        return real_scandir(folder)

    monkeypatch.setattr(os, "scandir", scandir)
    _code_fingerprint()
    own = [os.path.realpath(os.path.dirname(dpcheck.__file__))] + [os.path.realpath(p)
                                                                   for p in dpcheck.rules.__path__]
    assert walked and own[0] in walked
    assert all(any(folder == top or folder.startswith(top + os.sep) for top in own) for folder in walked), walked


def test_file_result_round_trips_through_the_cache_format():
    """The cross-file name lists are stored as space-separated strings: what comes back from
    the cache equals what the analysis produced, empty lists included."""
    from dpcheck.analysis.file import FileResult

    result = FileResult("m.py", "m")
    result.built_per_call = ["disparityregression", "Head"]
    result.built_elsewhere = []
    result.module_calls = {"layer.Post": ["#1", "lengths", "*"], "layer.Pre": []}
    result.scalar_forwards = {"crf.CRF": ["reduction@3=*|'mean'|'sum'"], "heads.Head": []}
    result.dataparallel_attributes = {"par.UserScatteredDataParallel": ["scatter", "gather"]}
    result.wrappers = {"models.Seg": ["par.UserScatteredDataParallel", "torch.nn.DataParallel"]}
    result.parameter_properties = {"base.ModelBase": ["device", "device_id"]}
    result.checkpoint_loads = "bare wrapped"
    result.forward_flags = {"nets.SpecNet": ["forward_mode", "use_aux"]}
    result.unnamed = ["models.Leftover"]
    result.mentions = ["Known", "VGGLoss"]
    result.builds_by_name = True
    result.lookup_namespaces = ["models", "pkg.nets"]
    result.bare_built = ["RingLoss", "GDL:loss_gdl:env.Base"]
    result.escaping = ["Net"]
    result.passed_attributes = ["model"]
    result.wrapped_attributes = ["discriminator", "generator"]
    result.parallel_helpers = {"data_parallel": ["0", "1"]}
    result.init_wrapped = {"base.BaseTrainer": ["model", "teacher"]}
    result.wrapping_methods = {"models.Encoder": ["parallelise@conv", "split@head"]}
    result.handed_wrappers = ["Procedure.Test@1", "utils.Loss@model=lr_regime"]
    result.pairing_helpers = {"do_mixup": ["0", "1"]}
    result.star_imports = ["losses", "pkg.models"]
    result.declared_all = []
    result.item_stores = {"model@policy.Policy": ["?", "heads.Categorical"]}
    back = FileResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert (back.unnamed, back.mentions, back.builds_by_name, back.lookup_namespaces) == (
        ["models.Leftover"], ["Known", "VGGLoss"], True, ["models", "pkg.nets"])
    empty = FileResult.from_dict(json.loads(json.dumps(FileResult("n.py", "n").to_dict())))
    assert (empty.unnamed, empty.mentions, empty.builds_by_name, empty.lookup_namespaces) == ([], [], False, [])
    assert (back.bare_built, back.escaping, back.passed_attributes) == (
        ["RingLoss", "GDL:loss_gdl:env.Base"], ["Net"], ["model"])
    assert (empty.bare_built, empty.escaping, empty.passed_attributes) == ([], [], [])
    assert back.checkpoint_loads == "bare wrapped"
    assert FileResult.from_dict(json.loads(json.dumps(FileResult("n.py", "n").to_dict()))).checkpoint_loads == ""
    assert back.dataparallel_attributes == {"par.UserScatteredDataParallel": ["scatter", "gather"]}
    assert back.wrappers == {"models.Seg": ["par.UserScatteredDataParallel", "torch.nn.DataParallel"]}
    assert back.parameter_properties == {"base.ModelBase": ["device", "device_id"]}
    assert back.forward_flags == {"nets.SpecNet": ["forward_mode", "use_aux"]}
    assert back.wrapped_attributes == ["discriminator", "generator"]
    assert FileResult.from_dict(json.loads(json.dumps(FileResult("n.py", "n").to_dict()))).wrapped_attributes == []
    assert back.parallel_helpers == {"data_parallel": ["0", "1"]}
    assert FileResult.from_dict(json.loads(json.dumps(FileResult("n.py", "n").to_dict()))).parallel_helpers == {}
    assert back.init_wrapped == {"base.BaseTrainer": ["model", "teacher"]}
    assert back.wrapping_methods == {"models.Encoder": ["parallelise@conv", "split@head"]}
    assert back.handed_wrappers == ["Procedure.Test@1", "utils.Loss@model=lr_regime"]
    assert FileResult.from_dict(json.loads(json.dumps(FileResult("n.py", "n").to_dict()))).handed_wrappers == []
    assert FileResult.from_dict(json.loads(json.dumps(FileResult("n.py", "n").to_dict()))).init_wrapped == {}
    assert back.pairing_helpers == {"do_mixup": ["0", "1"]}
    assert back.item_stores == {"model@policy.Policy": ["?", "heads.Categorical"]}
    assert FileResult.from_dict(json.loads(json.dumps(FileResult("n.py", "n").to_dict()))).item_stores == {}
    assert FileResult.from_dict(json.loads(json.dumps(FileResult("n.py", "n").to_dict()))).pairing_helpers == {}
    assert (back.star_imports, back.declared_all) == (["losses", "pkg.models"], [])  # (an empty `__all__` is kept)
    assert (empty.star_imports, empty.declared_all) == ([], None)
    assert back.scalar_forwards == {"crf.CRF": ["reduction@3=*|'mean'|'sum'"], "heads.Head": []}
    assert back.built_per_call == ["disparityregression", "Head"]
    assert back.built_elsewhere == []
    assert back.module_calls == {"layer.Post": ["#1", "lengths", "*"], "layer.Pre": []}


def test_cache_files_are_written_as_the_json_of_their_data():
    """The cache writer streams its two outer levels item by item: what it writes must read
    back as the same data (keys and strings that need escaping, empty dicts, deeper values)."""
    import io

    from dpcheck.cache import _write_json

    data = {"entries": {'a "b"\nc': {"sha256": "0" * 64, "result": {"x": [1, None, "\u2028\ud800"]}}, "e": {}},
            "tail": [1, 2], "": {}}
    out = io.StringIO()
    _write_json(out, data, 2)
    assert json.loads(out.getvalue()) == data
    assert "\n" not in out.getvalue()  # the header line's reader relies on it


def test_files_are_analysed_while_discovery_still_runs(tmp_path, monkeypatch):
    """Without a cache the pool starts once there are enough files for one: its workers analyse
    the first files found while the folders are still walked, and the results still come back
    in the order found, equal to a serial run's."""
    import time
    from pathlib import Path

    from dpcheck import engine
    from dpcheck.registry import select_rules

    codes = tuple(r.code for r in select_rules(None, [], []))
    paths = []
    for i in range(40):
        path = tmp_path / f"m{i:02d}.py"
        path.write_text(HAZARD if i % 2 else "x = 1\n")
        paths.append(path)
    started = tmp_path / "a worker started"
    analyse = engine._analyze_one

    def marking(path, display, rules):  # forked workers inherit the patch
        started.touch()
        return analyse(path, display, rules)

    monkeypatch.setattr(engine, "_analyze_one", marking)
    chunk_sizes = []
    make_pool = engine._pool

    def recording_pool(*args, **kwargs):
        pool = make_pool(*args, **kwargs)
        submit = pool.submit

        def recording(function, argument):
            if function is engine._worker_analyze:
                chunk_sizes.append(len(argument))
            return submit(function, argument)

        pool.submit = recording
        return pool

    monkeypatch.setattr(engine, "_pool", recording_pool)
    seen_while_discovering = []

    def discovered():
        for i, path in enumerate(paths):
            if i == 30:  # discovery waits here (at most 60 s) for a worker to have started
                deadline = time.monotonic() + 60
                while not started.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
                seen_while_discovering.append(started.exists())
            yield path, codes

    scanned: list[str] = []
    files, results = engine.analyze_discovered(discovered(), 2, engine.ModuleSummaries(scanned), scanned)
    assert seen_while_discovering == [True]
    # Files found while the pool was busy wait for the largest-first order (chunks of 2 files for
    # 40 files and 2 workers); none joins an early chunk.
    assert sum(chunk_sizes) == len(paths) and max(chunk_sizes) <= engine._EARLY_CHUNK
    assert files == paths and scanned == [str(p) for p in paths]
    serial, _ = engine.analyze_files(paths, codes, jobs=1)
    assert [r.to_dict() for r in results] == [r.to_dict() for r in serial]
    assert [Path(r.filename) for r in results] == paths and sum(len(r.findings) for r in results) > 0


def test_a_few_files_discovered_are_analysed_without_a_pool(tmp_path, monkeypatch):
    from dpcheck import engine

    paths = []
    for i in range(engine._PARALLEL_MIN_FILES - 1):
        path = tmp_path / f"m{i:02d}.py"
        path.write_text(HAZARD)
        paths.append(path)

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(engine, "_pool", no_pool)
    files, results = engine.analyze_discovered(((p, ("DP101",)) for p in paths), 2)
    assert files == paths and all(r.findings for r in results)


def test_the_parent_pauses_its_collector_while_the_pool_runs_and_settles(tmp_path, monkeypatch):
    """The parent keeps every result to the end: its cyclic collector is paused while results
    come back and while they are settled, and runs again afterwards; the workers' runs as the
    parent's did before (between files)."""
    import gc

    from dpcheck import engine
    from dpcheck.registry import select_rules

    codes = [r.code for r in select_rules(None, [], [])]
    paths = []
    for i in range(20):
        path = tmp_path / f"m{i:02d}.py"
        path.write_text(HAZARD)
        paths.append(path)
    marks = tmp_path / "marks"
    marks.mkdir()
    analyse = engine._analyze_one

    def marking(path, display, rules):  # in a worker (forked: the patch is inherited)
        (marks / f"{path.name}.{'on' if gc.isenabled() else 'off'}").touch()
        return analyse(path, display, rules)

    monkeypatch.setattr(engine, "_analyze_one", marking)
    seen = []
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    analysed = summaries.analysed
    monkeypatch.setattr(summaries, "analysed", lambda results: seen.append(gc.isenabled()) or analysed(results))
    settle_file = engine.RunResult.settle_file
    monkeypatch.setattr(engine.RunResult, "settle_file",
                        lambda self, *args: seen.append(gc.isenabled()) or settle_file(self, *args))
    gc.enable()
    results, _ = engine.analyze_files(paths, codes, jobs=2, summaries=summaries)
    assert gc.isenabled()
    run = engine.settle(results, summaries=summaries)
    assert gc.isenabled() and len(run.findings) == 2 * len(paths)
    assert seen and not any(seen)
    assert sorted(m.name for m in marks.iterdir()) == sorted(f"{p.name}.on" for p in paths)
