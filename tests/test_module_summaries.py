"""Out-of-tree modules the class index needs are summarised in the process pool while files
run (engine.ModuleSummaries), and a run gives the same findings as summarising them afterwards."""

import os
from pathlib import Path

import pytest

from dpcheck import engine
from dpcheck.registry import all_rules

ALL_CODES = [r.code for r in all_rules()]
# A model whose module-ness hangs on a base class imported from outside the scanned folder.
MODEL = '''from {base_module} import {base}


class Model{i}({base}):
    def __init__(self):
        super().__init__()
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return x
'''
FILES = 20  # more than engine._PARALLEL_MIN_FILES: the pool runs


def _package(root: Path, base_module: str, base: str, files: int = FILES) -> list[Path]:
    """pkg/ with a models/ folder (the files scanned) whose classes derive from ``base``."""
    (root / "pkg" / "models").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "models" / "__init__.py").write_text("")
    paths = []
    for i in range(files):
        path = root / "pkg" / "models" / f"model{i:02}.py"
        path.write_text(MODEL.format(base_module=base_module, base=base, i=i))
        paths.append(path)
    return paths


def _write(root: Path, relative: str, text: str) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(text)


def _run(paths, summaries, monkeypatch=None, forbid_parent_summaries=False):
    """(settled findings as (file, code) pairs, the ModuleSummaries used)."""
    results, _ = engine.analyze_files(paths, ALL_CODES, jobs=2, summaries=summaries)
    if forbid_parent_summaries:
        # Every summary the index takes must have been made in the pool.
        def refuse(path, module):
            raise AssertionError(f"{module} summarised after the pool")

        monkeypatch.setattr(engine, "summarize_module", refuse)
    run = engine.settle(results, summaries=summaries)
    return sorted((Path(f.filename).name, f.code) for f in run.findings)


def test_a_base_in_an_unscanned_module_is_summarised_in_the_pool(tmp_path, monkeypatch):
    paths = _package(tmp_path, "pkg.base", "Base")
    _write(tmp_path, "pkg/base.py", "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries, monkeypatch, forbid_parent_summaries=True)
    assert found == [(p.name, "DP101") for p in paths]
    assert summaries.take("pkg.base", str(tmp_path / "pkg" / "base.py")) is not None


def test_a_chain_of_re_exports_and_bases_is_followed_in_the_pool(tmp_path, monkeypatch):
    """`pkg.layers.Block` is re-exported by the package, and Block's first base lives in a third
    module: each summary the pool makes leads to the next."""
    paths = _package(tmp_path, "pkg.layers", "Block")
    _write(tmp_path, "pkg/layers/__init__.py", "from .block import Block\n")
    _write(tmp_path, "pkg/layers/block.py", "from pkg.core import Core\n\n\nclass Block(Core):\n    pass\n")
    _write(tmp_path, "pkg/core.py", "import torch\n\n\nclass Core(torch.nn.Module):\n    pass\n")
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries, monkeypatch, forbid_parent_summaries=True)
    assert found == [(p.name, "DP101") for p in paths]
    for module, file in [("pkg.layers", "pkg/layers/__init__.py"), ("pkg.layers.block", "pkg/layers/block.py"),
                         ("pkg.core", "pkg/core.py")]:
        assert summaries.take(module, str(tmp_path / file)) is not None, module


# A model whose DP101 runs only when forward's optional `mask` is passed: its finding is advice unless
# a call passes it, which settling asks of every class the scanned files build (``ClassIndex.passed``).
OPTIONAL_MODEL = '''import torch.nn as nn
from pkg.tools import Helper


def helper():
    return Helper()


class Model{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = 0

    def forward(self, x, mask=None):
        if mask is not None:
            self.steps += 1
        return x
'''


def test_the_modules_of_the_classes_built_are_summarised_in_the_pool_for_an_optional_argument(
        tmp_path, monkeypatch):
    """`pkg.tools` is needed only to read who calls `Helper` (a finding's `unpassed:` condition)."""
    (tmp_path / "pkg" / "models").mkdir(parents=True)
    for init in ("pkg/__init__.py", "pkg/models/__init__.py"):
        _write(tmp_path, init, "")
    _write(tmp_path, "pkg/tools.py", "class Helper:\n    pass\n")
    paths = []
    for i in range(FILES):
        paths.append(tmp_path / "pkg" / "models" / f"model{i:02}.py")
        paths[-1].write_text(OPTIONAL_MODEL.format(i=i))
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries, monkeypatch, forbid_parent_summaries=True)
    assert found == [(p.name, "DP101") for p in paths]
    assert summaries.take("pkg.tools", str(tmp_path / "pkg" / "tools.py")) is not None


def test_the_bases_of_a_base_are_summarised_in_the_pool_for_an_inherited_property(tmp_path, monkeypatch):
    """DP204's `parameter_property:` condition walks every base of the model's base (`Mixin`, in a
    module of its own that the base's module-ness does not need)."""
    paths = _package(tmp_path, "pkg.base", "Base")
    for path in paths:
        path.write_text(path.read_text().replace("return x", "return x.to(self.device)"))
    _write(tmp_path, "pkg/base.py", "import torch.nn as nn\nfrom pkg.mixin import Mixin\n\n\n"
                                    "class Base(nn.Module, Mixin):\n    pass\n")
    _write(tmp_path, "pkg/mixin.py", "import torch\n\n\nclass Mixin:\n    @property\n    def device(self):\n"
                                     "        return next(self.parameters()).device\n")
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries, monkeypatch, forbid_parent_summaries=True)
    assert found == sorted((p.name, code) for p in paths for code in ("DP101", "DP204"))
    assert summaries.take("pkg.mixin", str(tmp_path / "pkg" / "mixin.py")) is not None


def test_a_base_that_is_not_a_module_gives_no_finding_either_way(tmp_path):
    paths = _package(tmp_path, "pkg.base", "Base")
    _write(tmp_path, "pkg/base.py", "class Base:\n    def forward(self, x):\n        return x\n")
    with_pool = _run(paths, engine.ModuleSummaries([str(p) for p in paths]))
    assert with_pool == _run(paths, None)
    assert not any(code == "DP101" for _, code in with_pool)


def test_an_unscanned_module_that_fails_to_parse_is_skipped(tmp_path):
    paths = _package(tmp_path, "pkg.base", "Base")
    _write(tmp_path, "pkg/base.py", "import torch.nn as nn\n\nclass Base(nn.Module:\n    pass\n")
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    with_pool = _run(paths, summaries)
    assert with_pool == _run(paths, None)
    assert not any(code in ("DP001", "DP002") for _, code in with_pool)  # only scanned files report
    summary = summaries.take("pkg.base", str(tmp_path / "pkg" / "base.py"))
    assert summary is not None and summary.classes == []


def test_a_scanned_module_is_never_summarised_again(tmp_path):
    paths = _package(tmp_path, "pkg.models.base", "Base")
    base = tmp_path / "pkg" / "models" / "base.py"
    base.write_text("import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    paths.append(base)
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries)
    assert found == [(p.name, "DP101") for p in paths if p.name != "base.py"]
    assert summaries.take("pkg.models.base", str(base)) is None


def test_a_summary_of_another_file_is_not_taken(tmp_path):
    summaries = engine.ModuleSummaries([])
    result = engine.summarize_module(Path(__file__), "pkg.base")
    summaries.summarised(("pkg.base", "/somewhere/else/pkg/base.py", result))
    assert summaries.take("pkg.base", "/somewhere/else/pkg/base.py") is result
    assert summaries.take("pkg.base", "/another/root/pkg/base.py") is None
    assert summaries.take("pkg.other", "/somewhere/else/pkg/base.py") is None


def test_a_worker_that_dies_summarising_a_module_costs_no_result(tmp_path, monkeypatch):
    """The pool breaks: its unfinished files are analysed alone and the module is summarised
    after the pool, as when no summary was guessed."""
    paths = _package(tmp_path, "pkg.base", "Base")
    _write(tmp_path, "pkg/base.py", "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    parent = os.getpid()
    real = engine.summarize_module

    def dies_in_a_worker(path, module):
        if os.getpid() != parent:
            os._exit(3)
        return real(path, module)

    monkeypatch.setattr(engine, "summarize_module", dies_in_a_worker)  # forked workers inherit it
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries)
    assert found == [(p.name, "DP101") for p in paths]
    assert summaries.take("pkg.base", str(tmp_path / "pkg" / "base.py")) is None


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_command_line_gives_the_same_findings_with_summaries_made_in_the_pool(tmp_path, jobs):
    from conftest import run_cli

    paths = _package(tmp_path, "pkg.layers", "Block")
    _write(tmp_path, "pkg/layers/__init__.py", "from .block import Block\n")
    _write(tmp_path, "pkg/layers/block.py", "import torch\n\n\nclass Block(torch.nn.Module):\n    pass\n")
    (tmp_path / ".git").mkdir()
    proc = run_cli("pkg/models", "--no-cache", "-j", str(jobs), "--output-format", "concise", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "DP101" in line) == \
        sorted(str(p.relative_to(tmp_path)) for p in paths)


def test_the_guessing_index_does_not_keep_its_summaries_alive():
    """Start-up's objects are frozen out of the cyclic collector (dpcheck.startup), and a
    ModuleSummaries is made before that: a reference cycle with its index would keep it, and
    every result it was shown, alive until the interpreter's teardown. Reference counting
    alone must free it."""
    import gc
    import weakref

    collecting = gc.isenabled()
    gc.disable()
    try:
        summaries = engine.ModuleSummaries([])
        gone = weakref.ref(summaries)
        del summaries
        assert gone() is None
    finally:
        if collecting:
            gc.enable()


def test_the_module_of_a_wrapped_class_is_summarised_in_the_pool_for_a_store_on_the_wrapper(tmp_path, monkeypatch):
    """DP701's `forward_flag:` condition (a mode set on the wrapper that the wrapped class's forward
    tests) is settled from the summary of the class's module, outside the scanned folder."""
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/nets.py", "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
                                    "    def forward(self, x):\n        if self.mode == 'encoder':\n"
                                    "            return x\n        return -x\n")
    paths = []
    for i in range(FILES):
        paths.append(tmp_path / "pkg" / "scripts" / f"train{i:02}.py")
        _write(tmp_path, f"pkg/scripts/train{i:02}.py", "import torch.nn as nn\nfrom pkg.nets import Net\n\n"
                                                         "model = nn.DataParallel(Net()).cuda()\n"
                                                         "model.mode = 'encoder'\n")
    _write(tmp_path, "pkg/scripts/__init__.py", "")
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries, monkeypatch, forbid_parent_summaries=True)
    assert [f for f in found if f[1] == "DP701"] == [(p.name, "DP701") for p in paths]
    assert summaries.take("pkg.nets", str(tmp_path / "pkg" / "nets.py")) is not None


def test_the_layers_a_summarised_module_builds_are_summarised_in_the_pool(tmp_path, monkeypatch):
    """The models' base (`pkg.base`, outside the scan) builds a layer of a third module (`pkg.enc`):
    settling looks that layer up to know what the wrapped model runs (``ClassIndex.unwrapped``),
    which only the base's summary names, so the pool is asked for `pkg.enc` once that summary is in."""
    paths = _package(tmp_path, "pkg.base", "Base")
    _write(tmp_path, "pkg/base.py", "import torch.nn as nn\nfrom pkg.enc import Encoder\n\n\n"
                                    "class Base(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                                    "        self.enc = Encoder()\n")
    _write(tmp_path, "pkg/enc.py", "import torch.nn as nn\n\n\nclass Encoder(nn.Module):\n    pass\n")
    _write(tmp_path, "pkg/models/train.py", "import torch.nn as nn\nfrom pkg.models.model00 import Model0\n\n"
                                            "model = nn.DataParallel(Model0())\n")
    paths.append(tmp_path / "pkg" / "models" / "train.py")
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries, monkeypatch, forbid_parent_summaries=True)
    assert ("model00.py", "DP101") in found
    assert summaries.take("pkg.enc", str(tmp_path / "pkg" / "enc.py")) is not None


def test_every_module_a_forward_flag_condition_names_is_summarised_in_the_pool(tmp_path, monkeypatch):
    """DP701's `forward_flag:` condition names each class (or imported callable) the wrapper may
    hold: here `build_net` of `pkg.builders` as well as the wrapped `Net`. The wrap's lookups reach
    only `pkg.nets` (the construction traced), so only the condition leads the pool to `pkg.builders`,
    which settling reads when `Net`'s forward does not test the flag."""
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/nets.py", "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
                                    "    def forward(self, x):\n        return x\n")
    _write(tmp_path, "pkg/builders.py", "from pkg.nets import Net\n\n\ndef build_net():\n    return Net()\n")
    paths = []
    for i in range(FILES):
        paths.append(tmp_path / "pkg" / "scripts" / f"train{i:02}.py")
        _write(tmp_path, f"pkg/scripts/train{i:02}.py", "import torch.nn as nn\nfrom pkg.nets import Net\n"
                                                         "from pkg.builders import build_net\n\n"
                                                         "net = Net() if {i} else build_net()\n"
                                                         "model = nn.DataParallel(net).cuda()\n"
                                                         "model.mode = 'encoder'\n".replace("{i}", str(i % 2)))
    _write(tmp_path, "pkg/scripts/__init__.py", "")
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    found = _run(paths, summaries, monkeypatch, forbid_parent_summaries=True)
    assert not [f for f in found if f[1] in ("DP701", "DP002")], found
    assert summaries.take("pkg.builders", str(tmp_path / "pkg" / "builders.py")) is not None
