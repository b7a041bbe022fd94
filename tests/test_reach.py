"""Import reach file by file (dpcheck.analysis.reach.ImportGraph): which scanned files a file that
wraps a model can run. Paths are synthetic: the graph reads only the index's file records."""
import os

from dpcheck.analysis.reach import ImportGraph


def _graph(files, opaque=(), elsewhere=None, training=frozenset(), classes=None):
    files = {os.path.normpath(f): record for f, record in files.items()}
    return ImportGraph(files, set(map(os.path.normpath, opaque)),
                       lambda name: set(map(os.path.normpath, (elsewhere or {}).get(name, ()))), frozenset(training),
                       {os.path.normpath(f): names for f, names in (classes or {}).items()})


def _n(*paths):
    return {os.path.normpath(p) for p in paths}


MONOREPO = {
    "repo/a/train.py": ("train", ["model", "model:Net"]),
    "repo/a/model.py": ("model", []),
    "repo/b/train.py": ("train", ["model", "model:Regressor"]),
    "repo/b/model.py": ("model", []),
}


def test_a_scripts_import_is_the_file_beside_it_not_every_module_of_that_name():
    graph = _graph(MONOREPO, elsewhere={"model": ["repo/a/model.py", "repo/b/model.py"]})
    runners = graph.runners(os.path.normpath("repo/a/train.py"))
    assert runners == _n("repo/a/train.py")
    assert graph.reach(runners) == _n("repo/a/train.py", "repo/a/model.py")


def test_an_import_no_file_answers_from_its_folder_falls_back_to_every_module_of_that_name():
    files = {"repo/tools/train.py": ("train", ["lib.net", "lib.net:Net"]),
             "repo/lib/__init__.py": ("lib", []), "repo/lib/net.py": ("lib.net", [])}
    graph = _graph(files, elsewhere={"lib.net": ["repo/lib/__init__.py", "repo/lib/net.py"]})
    reach = graph.reach(graph.runners(os.path.normpath("repo/tools/train.py")))
    assert reach == _n("repo/tools/train.py", "repo/lib/__init__.py", "repo/lib/net.py")


VENDORED = {
    "repo/lib/__init__.py": ("lib", [".lib.trainer", ".lib.trainer:Trainer", ".lib.modeling",
                                     ".lib.modeling:BigModel"]),
    "repo/lib/trainer.py": ("lib.trainer", []),
    "repo/lib/modeling.py": ("lib.modeling", []),
}


def test_a_wrap_only_a_packages_init_hands_on_by_a_name_no_file_takes_never_runs():
    graph = _graph({**VENDORED, "repo/run.py": ("run", ["lib", "lib:BigModel"])})
    assert graph.runners(os.path.normpath("repo/lib/trainer.py")) is None


def test_a_script_that_takes_the_wrapping_name_or_the_whole_package_runs_the_wrap():
    for imports in (["lib", "lib:BigModel", "lib:Trainer"], ["lib"], ["lib.trainer", "lib.trainer:Trainer"]):
        graph = _graph({**VENDORED, "repo/run.py": ("run", imports)})
        runners = graph.runners(os.path.normpath("repo/lib/trainer.py"))
        assert runners is not None and os.path.normpath("repo/run.py") in runners, imports
        assert os.path.normpath("repo/lib/modeling.py") in graph.reach(runners)


def test_importing_a_packages_submodule_takes_none_of_the_names_the_package_binds():
    # `from lib.modeling import BigModel` runs `lib/__init__.py`, which imports the trainer, but binds
    # none of its names: `Trainer` is not used through it.
    graph = _graph({**VENDORED, "repo/run.py": ("run", ["lib.modeling", "lib.modeling:BigModel"])})
    assert graph.runners(os.path.normpath("repo/lib/trainer.py")) is None
    # `import lib.modeling` binds `lib`, through which anything may be used.
    graph = _graph({**VENDORED, "repo/run.py": ("run", ["lib.modeling"])})
    assert os.path.normpath("repo/run.py") in graph.runners(os.path.normpath("repo/lib/trainer.py"))


# A vendored library beside a project's script: its modules import each other densely (`lookup.py`
# imports the whole package to find classes by name), its trainer wraps whatever model it is handed.
LIBRARY = {
    **VENDORED,
    "repo/lib/lookup.py": ("lib.lookup", ["lib"]),
    "repo/lib/modeling.py": ("lib.modeling", [".lib.lookup", ".lib.lookup:find"]),
    "repo/lib/seq2seq.py": ("lib.seq2seq", [".lib.trainer", ".lib.trainer:Trainer"]),
}
LIBRARY["repo/lib/__init__.py"] = ("lib", [*VENDORED["repo/lib/__init__.py"][1], ".lib.seq2seq",
                                           ".lib.seq2seq:Seq2SeqTrainer"])
LIBRARY_CLASSES = {"repo/lib/trainer.py": {"Trainer"}, "repo/lib/modeling.py": {"BigModel"},
                   "repo/lib/seq2seq.py": {"Seq2SeqTrainer"}}


# (`run.py` trains beside `lib/` with what it imports from it: `lib/` is a library it trains with.)
TRAINS_WITH_LIBRARY = _n("repo/run.py", "repo/lib/trainer.py")


def test_a_handed_wrap_in_a_library_the_project_builds_no_trainer_of_never_runs():
    graph = _graph({**LIBRARY, "repo/run.py": ("run", ["lib", "lib:BigModel"])}, classes=LIBRARY_CLASSES,
                   training=TRAINS_WITH_LIBRARY)
    trainer = os.path.normpath("repo/lib/trainer.py")
    assert graph.runners(trainer, handed=True) is None
    # Followed name by name, the library's own whole import makes every class of it a way in.
    assert os.path.normpath("repo/run.py") in graph.runners(trainer)


def test_a_package_that_holds_training_code_of_its_own_or_no_script_trains_with_is_followed_name_by_name():
    # BasicSR's `basicsr/train.py`, run as a module: the package is the project, not a library of it.
    files = {**LIBRARY, "repo/run.py": ("run", ["lib", "lib:BigModel"])}
    trainer = os.path.normpath("repo/lib/trainer.py")
    for training in (TRAINS_WITH_LIBRARY | _n("repo/lib/seq2seq.py"), _n("repo/lib/trainer.py")):
        graph = _graph(files, classes=LIBRARY_CLASSES, training=training)
        assert graph.runners(trainer, handed=True) == graph.runners(trainer) is not None


def test_a_handed_wrap_in_a_library_runs_where_the_project_builds_its_holder_or_a_subclass():
    trainer = os.path.normpath("repo/lib/trainer.py")
    for taken in ("Trainer", "Seq2SeqTrainer"):
        graph = _graph({**LIBRARY, "repo/run.py": ("run", ["lib", f"lib:{taken}"])}, classes=LIBRARY_CLASSES,
                       training=TRAINS_WITH_LIBRARY)
        runners = graph.runners(trainer, handed=True)
        assert runners is not None and os.path.normpath("repo/run.py") in runners, taken


def test_a_handed_wrap_of_a_library_checked_alone_is_followed_name_by_name():
    # No scanned file outside the package: a library checked as one, whose own modules are its users.
    graph = _graph({**LIBRARY, "repo/lib/cli.py": ("lib.cli", ["lib", "lib:BigModel"])}, classes=LIBRARY_CLASSES)
    trainer = os.path.normpath("repo/lib/trainer.py")
    assert os.path.normpath("repo/lib/cli.py") in graph.runners(trainer, handed=True) == graph.runners(trainer)


def test_a_wrapping_script_nothing_imports_runs():
    graph = _graph({"repo/train.py": ("train", [])})
    assert graph.runners(os.path.normpath("repo/train.py")) == _n("repo/train.py")


def test_reach_is_unknown_through_a_file_that_loads_by_a_computed_name():
    files = {"repo/train.py": ("train", ["models", "models:get"]), "repo/models/__init__.py": ("models", [])}
    graph = _graph(files, opaque=["repo/models/__init__.py"])
    assert graph.reach(graph.runners(os.path.normpath("repo/train.py"))) is None


def test_reach_is_unknown_through_an_import_of_a_project_file_the_run_left_out(tmp_path):
    # A corpus subset without `models/select.py` (on disk, not scanned), imported by a script beside
    # `models/` and by a launcher in `tools/`: that file may import anything.
    for name in ("models/net.py", "models/select.py", "tools/train.py", "train.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    scanned = {str(tmp_path / "models/net.py"): ("net", [])}
    for script in ("train.py", "tools/train.py"):
        graph = _graph({**scanned, str(tmp_path / script): ("train", ["models.select", "models.select:define"])})
        assert graph.reach(graph.runners(os.path.normpath(str(tmp_path / script)))) is None, script
    # A module of the project's own folder `models/`, even one the disk does not hold: not all known.
    script = os.path.normpath(str(tmp_path / "train.py"))
    graph = _graph({**scanned, script: ("train", ["models.absent", "models.absent:define"])})
    assert graph.reach(graph.runners(script)) is None
    # An installed library's module (`transformers.activations` where a vendored `transformers/` lies
    # in another subproject, without that file): known, the script's alone.
    (tmp_path / "sub/transformers").mkdir(parents=True)
    (tmp_path / "sub/transformers/__init__.py").write_text("")
    vendored = {**scanned, str(tmp_path / "sub/transformers/__init__.py"): ("transformers", [])}
    for imports in (["timmlib.layers", "timmlib.layers:DropPath"], ["transformers.activations",
                                                                     "transformers.activations:ACT2FN"]):
        graph = _graph({**vendored, script: ("train", imports)})
        assert graph.reach(graph.runners(script)) == {script}, imports


def test_a_file_in_a_folder_without_init_resolves_from_the_folder_above_too(tmp_path):
    # KAIR's `models/model_plain.py` (no `models/__init__.py`), run as `models.model_plain` from the
    # root, imports `models.select_network`, a file of its own folder the run left out.
    plain = os.path.normpath(str(tmp_path / "models/model_plain.py"))
    files = {plain: ("model_plain", ["models.select_network", "models.select_network:define_G",
                                     "models.model_base", "models.model_base:ModelBase"]),
             os.path.normpath(str(tmp_path / "models/model_base.py")): ("model_base", [])}
    graph = _graph(files)
    assert graph.reach(graph.runners(plain)) is None
    del files[plain][1][:2]  # (without the left-out import: the base beside it, found from above)
    graph = _graph(files)
    assert graph.reach(graph.runners(plain)) == set(files)


def test_a_top_package_beside_the_importer_counts_where_it_holds_only_folders(tmp_path):
    # `lib/` holds no file of its own, only `lib/models/net.py`: `lib.select`, absent, is the
    # project's own module left out all the same.
    (tmp_path / "lib/models").mkdir(parents=True)
    script = os.path.normpath(str(tmp_path / "train.py"))
    files = {script: ("train", ["lib.select", "lib.select:build"]),
             os.path.normpath(str(tmp_path / "lib/models/net.py")): ("net", [])}
    graph = _graph(files)
    assert graph.reach(graph.runners(script)) is None


def test_an_import_of_a_library_another_subproject_vendors_is_the_installed_library():
    """CAIL2021's `ydlj/baseline/transformers/`, which `ydlj/baseline/run_cail2021.py` trains with, is
    not what `xxcq/baseline/run_ner.py` imports as `transformers`: that is the installed library."""
    files = {
        "repo/ydlj/run_cail.py": ("run_cail", ["transformers", "transformers:AutoModel"]),
        "repo/ydlj/transformers/__init__.py": ("transformers", [".modeling", ".modeling:AutoModel"]),
        "repo/ydlj/transformers/modeling.py": ("transformers.modeling", []),
        "repo/xxcq/run_ner.py": ("run_ner", ["transformers", "transformers:BertModel",
                                             "transformers.models.bert", "transformers.models.bert:BertModel"]),
    }
    elsewhere = {"transformers": ["repo/ydlj/transformers/__init__.py"]}

    def reach(training):
        graph = _graph(files, elsewhere=elsewhere, training=training)
        return graph.reach(graph.runners(os.path.normpath("repo/xxcq/run_ner.py")))

    assert reach(_n("repo/ydlj/run_cail.py", "repo/xxcq/run_ner.py")) == _n("repo/xxcq/run_ner.py")
    # No script beside the folder trains with it: a package a launcher puts on `sys.path` (a `lib/`
    # beside `tools/`), which the import may well mean.
    assert os.path.normpath("repo/ydlj/transformers/__init__.py") in reach(_n("repo/xxcq/run_ner.py"))


def test_a_package_beside_a_scripts_folder_is_still_what_its_scripts_import():
    files = {
        "repo/tools/train.py": ("train", ["models", "models:Net"]),
        "repo/lib/models/__init__.py": ("models", [".net", ".net:Net"]),
        "repo/lib/models/net.py": ("models.net", []),
    }
    graph = _graph(files, elsewhere={"models": ["repo/lib/models/__init__.py"]}, training=_n("repo/tools/train.py"))
    reach = graph.reach(graph.runners(os.path.normpath("repo/tools/train.py")))
    assert os.path.normpath("repo/lib/models/net.py") in reach


REGISTRY = {
    "repo/train.py": ("train", ["models", "models:build_model"]),
    "repo/models/__init__.py": ("models", ["models.*", "utils", "utils:scandir"]),
    "repo/models/sr_model.py": ("models.sr_model", ["models.base_model", "models.base_model:BaseModel"]),
    "repo/models/base_model.py": ("models.base_model", []),
    "repo/utils.py": ("utils", []),
    "repo/kernel_tool/loss.py": ("loss", []),
    "repo/kernel_tool/kernel_gan.py": ("kernel_gan", ["loss", "loss:GANLoss"]),
}


def test_a_registry_that_loads_its_packages_modules_by_a_computed_name_runs_those_and_no_others():
    # models/__init__.py: `import_module(f"models.{name}")` for each file it scans (mentions records
    # `models.*`): it runs every module of `models/`, so train.py runs base_model.py's wrap, and reaches
    # nothing outside `models/` (a single-GPU tool's loss beside it).
    graph = _graph(REGISTRY)
    runners = graph.runners(os.path.normpath("repo/models/base_model.py"))
    assert runners is not None and os.path.normpath("repo/train.py") in runners
    reach = graph.reach(runners)
    assert reach is not None and os.path.normpath("repo/models/sr_model.py") in reach
    assert not reach & _n("repo/kernel_tool/loss.py", "repo/kernel_tool/kernel_gan.py")


def test_a_registry_whose_package_no_scanned_folder_holds_reaches_what_is_not_known(tmp_path):
    # `import_module(f"archs.{name}")` where `archs/` is on disk but was left out of the run: not known.
    (tmp_path / "archs").mkdir()
    files = {str(tmp_path / "train.py"): ("train", ["registry", "registry:build"]),
             str(tmp_path / "registry.py"): ("registry", ["archs.*"])}
    graph = _graph(files)
    assert graph.reach(graph.runners(os.path.normpath(str(tmp_path / "train.py")))) is None
