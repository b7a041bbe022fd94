"""dpcheck.startup: the collector is paused from the command line's first step until the
first file is analysed, and left as it was found."""

import gc

import pytest
from conftest import HAZARD

from dpcheck import cli, engine, run, startup


@pytest.fixture(autouse=True)
def _collector_restored():
    enabled = gc.isenabled()
    yield
    gc.unfreeze()  # what a test froze goes back to the collector
    (gc.enable if enabled else gc.disable)()


def test_pause_and_resume_freeze_what_start_up_made():
    gc.enable()
    startup.pause()
    assert not gc.isenabled()
    startup.resume()
    assert gc.isenabled() and gc.get_freeze_count() > 0
    startup.resume()  # a second resume changes nothing
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    startup.pause()
    startup.resume()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


def test_a_run_starts_paused_and_analyses_its_files_with_the_collector_on(tmp_path, monkeypatch):
    (tmp_path / "bad.py").write_text(HAZARD)
    monkeypatch.chdir(tmp_path)
    seen = {}

    def watch(name, function):
        def watched(*args, **kwargs):
            seen[name] = gc.isenabled()
            return function(*args, **kwargs)
        return watched

    monkeypatch.setattr(run, "run_check", watch("run_check", run.run_check))
    monkeypatch.setattr(engine, "_analyze_one", watch("analyze", engine._analyze_one))
    gc.enable()
    with pytest.raises(SystemExit) as exited:
        cli.main(["bad.py", "--no-cache", "-q", "--exit-zero"])
    assert exited.value.code == 0
    assert seen == {"run_check": False, "analyze": True} and gc.isenabled()


def test_a_command_that_analyses_nothing_leaves_the_collector_on(capsys):
    gc.enable()
    with pytest.raises(SystemExit):
        cli.main(["rule", "DP101"])
    assert gc.isenabled() and "DP101" in capsys.readouterr().out
