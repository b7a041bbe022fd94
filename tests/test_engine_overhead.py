"""The per-file engine shortcuts (string paths, per-folder memos, lazy loader roots) give
the same answers as the plain Path/fnmatch/realpath computations they replace."""

import fnmatch
import os
from pathlib import Path

import pytest

from dpcheck import engine
from dpcheck.analysis.file import FileResult
from dpcheck.config import Resolver
from dpcheck.discovery import DEFAULT_EXCLUDE, Excluder, discover


def test_excluder_name_regex_matches_like_fnmatch_over_each_pattern(tmp_path):
    patterns = [*DEFAULT_EXCLUDE, "*_tf_*.py", "gen?", "[ab]*.pyi", "data/**"]
    excluder = Excluder(tmp_path, patterns)
    names = ["build", "builder", "modeling_tf_bert.py", "modeling_bert.py", "gen1", "gen12",
             "a.pyi", "c.pyi", ".venv", "venv2", "__pycache__", "x.py"]
    for name in names:
        expected = any(fnmatch.fnmatchcase(name, p) for p in excluder.name_patterns)
        assert excluder.excluded_text(name, str(tmp_path / name), str(tmp_path / name)) == expected, name
        assert excluder.excluded(tmp_path / name) == expected, name


def test_excluder_path_patterns_are_relative_to_the_root(tmp_path):
    excluder = Excluder(tmp_path, ["data/**", "src/gen"])
    assert excluder.excluded_text("x.py", "p", str(tmp_path / "data" / "x.py"))
    assert excluder.excluded_text("gen", "p", str(tmp_path / "src" / "gen"))
    assert not excluder.excluded_text("m.py", "p", str(tmp_path / "src" / "m.py"))
    # A pattern names the path itself: the walk never enters `src/gen`, a folder named below it
    # on the command line is walked, and --force-exclude asks the folders above
    # (`excluded_anywhere`).
    assert not excluder.excluded_text("m.py", "p", str(tmp_path / "src" / "gen" / "m.py"))
    (tmp_path / "src" / "gen").mkdir(parents=True)
    assert excluder.excluded_anywhere(tmp_path / "src" / "gen" / "m.py")
    # A real path outside the root is matched as written.
    assert excluder.excluded_text("x.py", "data/x.py", "/elsewhere/x.py")
    assert not excluder.excluded_text("x.py", "other/x.py", "/elsewhere/x.py")


def test_walk_from_the_working_folder_yields_paths_as_pathlib_writes_them(tmp_path, monkeypatch):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "m.py").write_text("x = 1\n")
    (tmp_path / "top.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    found = list(discover([Path(".")], tmp_path, []))
    assert [str(p) for p in found] == ["pkg/sub/m.py", "top.py"]
    assert [str(p) for p in discover([Path("pkg/")], tmp_path, [])] == ["pkg/sub/m.py"]


def test_real_folders_agree_with_realpath_through_links(tmp_path):
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    os.symlink(tmp_path / "a" / "b", tmp_path / "link")
    (tmp_path / "link2").symlink_to("a")
    real = engine._RealFolders()
    for folder in [tmp_path / "a" / "b" / "c", tmp_path / "link" / "c", tmp_path / "link2" / "b",
                   tmp_path / "missing" / "x", Path("/")]:
        assert real(str(folder)) == os.path.realpath(folder), folder


def test_module_loader_finds_package_roots_only_when_a_module_is_needed(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("import torch\nclass Base(torch.nn.Module):\n    pass\n")
    results = [FileResult(str(pkg / "model.py"), "pkg.model")]
    calls = []
    real_islink = os.path.islink
    monkeypatch.setattr(engine.os.path, "islink", lambda p: calls.append(p) or real_islink(p))
    load = engine.module_loader(results)
    assert calls == []  # made, not yet used: no file system work
    loaded = load("pkg.base")
    assert loaded is not None and [c.qualname for c in loaded.classes] == ["pkg.base.Base"]
    assert calls
    assert load("pkg.nothing") is None


@pytest.mark.parametrize("as_text", [False, True])
def test_resolver_memo_gives_the_closest_configuration(tmp_path, as_text):
    (tmp_path / "pyproject.toml").write_text("[tool.dpcheck]\nignore = ['DP101']\n")
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    (tmp_path / "a" / "dpcheck.toml").write_text("ignore = ['DP301']\n")
    resolver = Resolver(tmp_path)
    wrap = str if as_text else (lambda p: p)
    outer = resolver.for_file(wrap(tmp_path / "m.py"))
    deep = resolver.for_file(wrap(inner / "m.py"))
    assert outer.ignore == ["DP101"] and deep.ignore == ["DP301"]
    assert resolver.for_folder(wrap(inner)) is deep
    assert resolver.for_folder(wrap(tmp_path / "a")) is deep
    assert resolver.for_folder(wrap(tmp_path)) is outer


@pytest.mark.parametrize("data", [
    b"x = 1\n", b"", b"\n\n", "s = 'caf\u00e9'\n".encode(), b"\xef\xbb\xbfx = 1\n",
    b"# -*- coding: latin-1 -*-\ns = '\xe9'\n", b"#!/usr/bin/env python\n# coding=cp1252\ns = '\x80'\n",
    b"x = 1\n# coding: latin-1\n", b"\n\n# coding: latin-1\ns = '\xe9'\n", b"x = 1\ns = '\xe9'\n",
    b"s = '\xe9'\n", b"# coding: no-such-codec\n", b"\xef\xbb\xbf# coding: latin-1\n", b"x = 1",
])
def test_read_source_decodes_as_tokenize_detect_encoding_does(tmp_path, data):
    """The UTF-8 shortcut of read_source gives the text (or the error) tokenize would."""
    import io
    import tokenize

    from dpcheck.analysis.file import read_source

    path = tmp_path / "m.py"
    path.write_bytes(data)
    try:
        expected = data.decode(tokenize.detect_encoding(io.BytesIO(data).readline)[0])
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        with pytest.raises(type(exc)) as raised:
            read_source(path)
        assert str(raised.value) == str(exc)
    else:
        assert read_source(path) == expected


def test_rules_are_listed_as_pkgutil_lists_them():
    import pkgutil

    import dpcheck.rules
    from dpcheck.registry import _module_names, all_rules

    assert list(_module_names(dpcheck.rules.__path__)) == [m.name for m in pkgutil.iter_modules(dpcheck.rules.__path__)]
    assert len(all_rules()) == len([m for m in pkgutil.iter_modules(dpcheck.rules.__path__) if not m.name.startswith("_")])
