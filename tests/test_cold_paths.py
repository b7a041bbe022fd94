"""The cold run's faster paths give the answers of the plain code they replace: the generated
tree walk, the fact shortcuts (names picked in C, hooks searched only where registered, the
module test reading the file's walk), and the module summaries guessed through a ClassIndex."""

import ast
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import file_context

from dpcheck.analysis.classes import _reads_like_module
from dpcheck.analysis.file import FileResult
from dpcheck.analysis.index import ClassIndex, Pending
from dpcheck.analysis.model_class import ModelClass, registers_hooks
from dpcheck.analysis.tree import TreeIndex, _walk_recursively, _walk_with_stack
from dpcheck.analysis.wrapping import _unused_outside_api

REPO = Path(__file__).resolve().parent.parent

# Every kind of node field: lists with None in them (`{**d}`'s key, a keyword-only argument
# without a default), optional nodes, match patterns, f-strings, decorators, `except*`.
EVERY_SHAPE = '''
from __future__ import annotations
import os.path as p, sys
from . import sibling
from ..pkg import (a as b, c)

@decorator(arg, *rest, key=1, **kw)
class Net(Base, metaclass=Meta):
    """Doc."""
    attr: int = 0
    other: "Tensor"

    async def method(self, a, /, b: int = 1, *args, c, d=2, **kw) -> None:
        global g
        x = {**kw, "k": 1, **{}}
        y = [i async for i in aiter() if i if not i]
        z = {k: v for k, v in x.items()}
        w = (lambda q=1, *, r: q + r)(1, r=2)
        async with ctx() as (u, v), other():
            pass
        async for i in agen():
            break
        else:
            continue
        try:
            raise ValueError from None
        except* (TypeError, ValueError) as err:
            pass
        finally:
            del x[0], y[1:2:3]
        match w:
            case [1, *rest] | (2 | 3):
                pass
            case {"k": v, **more} if v:
                pass
            case Point(x=0, y=yy) as pt:
                pass
            case _:
                pass
        assert x, f"{x!r:>{width}} {y=}"
        return (yield from gen()) if x else (await coro())

while a < b <= c is not d:
    a += 1; b @= c; nonlocal_ = not a or b and c
print(*args, sep="", **{"end": ""}); t = a[1:], a[::2], a[..., None]
'''


@pytest.mark.parametrize("source", ["every_shape", "dpcheck", "fixtures"])
def test_the_generated_walk_equals_the_walk_by_hand(source):
    if source == "every_shape":
        texts = [EVERY_SHAPE]
    else:
        folder = REPO / source
        texts = [path.read_text(encoding="utf-8") for path in sorted(folder.rglob("*.py"))[:120]]
    for text in texts:
        tree = ast.parse(text)
        assert _walk_recursively(tree) == _walk_with_stack(tree)
        order = _walk_recursively(tree)[0]
        # The reference: every node ast.walk finds, bar the shared Load/Store and operator singletons.
        expected = [n for n in ast.walk(tree) if not isinstance(
            n, (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop))]
        assert sorted(map(id, order)) == sorted(map(id, expected))


def test_a_tree_built_by_hand_with_a_missing_field_is_walked_by_hand():
    call = ast.Call(func=ast.Name("f", ast.Load()), args=[ast.Constant(1)])  # no keywords field
    tree = ast.Expression(call)
    with pytest.raises(AttributeError):
        _walk_recursively(tree)
    index = TreeIndex(tree)
    assert index.order == [tree, call, call.func, call.args[0]]
    assert index.parents.get(call.args[0]) is call


def _unused_by_hand(ctx):
    """The plain reading of ``_unused_outside_api``: a Python step per call, name and string."""
    declared = None
    for stmt in ctx.tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets):
            declared = {e.value for e in stmt.value.elts if isinstance(e, ast.Constant)}
    candidates = {s.name: s for s in ctx.tree.body
                  if isinstance(s, ast.ClassDef) and s.name not in declared and not s.decorator_list}
    tested = {id(n) for call in ast.walk(ctx.tree) if isinstance(call, ast.Call)
              and isinstance(call.func, ast.Name) and call.func.id in ("isinstance", "issubclass")
              and len(call.args) == 2 for n in ast.walk(call.args[1]) if isinstance(n, ast.Name)}
    used = set()
    for name, node in candidates.items():
        inside = {id(n) for n in ast.walk(node)}
        for other in ast.walk(ctx.tree):
            if isinstance(other, ast.Name) and other.id == name and id(other) not in tested | inside:
                used.add(name)
            if isinstance(other, ast.Constant) and other.value == name and isinstance(other.value, str):
                used.add(name)
    return frozenset(candidates.keys() - used)


def test_unused_outside_api_picks_the_same_classes_as_the_plain_reading():
    ctx = file_context('''
        import torch.nn as nn
        __all__ = ["Public"]

        class Public(nn.Module):
            pass

        class Helper(nn.Module):              # built by Public's sibling below: used
            pass

        class SelfNamed(nn.Module):           # names itself only: unused
            def forward(self, x):
                return super(SelfNamed, self).forward(x)

        class Tested(nn.Module):              # only tested with isinstance: unused
            pass

        class Annotated(nn.Module):           # in an annotation: used
            pass

        class Registered(nn.Module):          # named in a string: used
            pass

        @register
        class Decorated(nn.Module):           # decorated: never a candidate
            pass

        class Builder(nn.Module):             # nothing builds it: unused
            def __init__(self, layer: Annotated):
                self.block = Helper()
                self.ok = isinstance(layer, (Tested, nn.Linear))
                self.kind = "Registered"
                self.numbers = (1, 2.0, b"Tested", None)
    ''')
    found = _unused_outside_api(ctx)
    assert found == _unused_by_hand(ctx) == {"SelfNamed", "Tested", "Builder"}


def test_reads_like_module_from_the_walk_equals_ast_walk():
    ctx = file_context('''
        from mylib import Base, Other
        import torch

        class Layered(Base):
            def __init__(self):
                self.fc = torch.nn.Linear(2, 2)
            def forward(self, x):
                return x

        class Registers(Base):
            scale = torch.nn.Parameter(torch.ones(1))
            def forward(self, x):
                return x

        class Plain(Other):
            def __init__(self):
                self.n = Other()
            def forward(self, x):
                return x
    ''')
    answers = {name: _reads_like_module(info, ctx.imports, ctx.tree_index) for name, info in ctx.classes.items()}
    assert answers == {name: _reads_like_module(info, ctx.imports) for name, info in ctx.classes.items()}
    assert answers == {"Layered": True, "Registers": True, "Plain": False}


def test_hooks_are_searched_only_in_files_that_register_one():
    with_hook = file_context('''
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                self.fc = nn.Linear(2, 2)
                self.fc.register_forward_hook(self.grab)
            def grab(self, module, inputs, output):
                self.last = output
            def forward(self, x):
                return self.fc(x)
    ''')
    without = file_context('''
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                return self.register(x)
    ''')
    assert registers_hooks(with_hook) and not registers_hooks(without)
    model = ModelClass(with_hook, with_hook.classes["Net"], frozenset())
    assert [fn.name for fn in model.hooks] == ["grab"]
    assert ModelClass(without, without.classes["Net"], frozenset()).hooks == []


def test_resolve_remembers_each_node_and_keeps_it():
    ctx = file_context("import torch.nn as nn\nx = nn.Linear\n")
    node = ctx.tree.body[1].value
    assert ctx.resolve(node) == "torch.nn.Linear"
    assert ctx.resolve(node) == "torch.nn.Linear" and node in ctx.resolve.__self__
    constant = ast.Constant(1)
    assert ctx.resolve(constant) is None and constant in ctx.resolve.__self__  # not a name: None, remembered too


def _fixture_contexts():
    """The FileContext of every fixture file that parses (the shapes the rules are tested on)."""
    for path in sorted((REPO / "fixtures").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        yield path, file_context(text)


def test_resolve_gives_the_import_maps_answer_for_every_node_asked_twice():
    for path, ctx in _fixture_contexts():
        nodes = [*ctx.nodes(ast.Attribute), *ctx.nodes(ast.Name), *ctx.nodes(ast.Call)]
        expected = [ctx.imports.resolve(n) for n in nodes]
        assert [ctx.resolve(n) for n in nodes] == expected, path
        assert [ctx.resolve(n) for n in nodes] == expected, path  # remembered: the same answers


def test_attrs_and_local_values_equal_their_readings_without_shortcuts(monkeypatch):
    """``ModelClass.attrs`` hands ``_record_call`` only the calls it can record and skips plain-name
    targets; ``local_values`` binds plain names inline: each equals the reading that passes every
    call and target through (a callee ``_RECORDED_CALLS`` left out would lose an attribute fact)."""
    from dpcheck.analysis import model_class
    from dpcheck.analysis import tree as tree_module
    from dpcheck.analysis.model_class import file_models

    class Everything:
        def __contains__(self, item):
            return True

    def local_values_by_hand(fn):
        values = {}
        for node in fn.nodes(ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    tree_module._bind(target, node.value, values)
            elif node.value is not None:
                value = ast.BinOp(node.target, node.op, node.value) if isinstance(node, ast.AugAssign) else node.value
                tree_module._bind(node.target, value, values)
        return values

    def facts(attrs):
        return {name: (f.kinds, f.element_kinds, f.requires, [(id(t), id(v), id(fn.node)) for t, v, fn in f.assignments])
                for name, f in attrs.items()}

    checked = 0
    for path, ctx in _fixture_contexts():
        for model in file_models(ctx):
            fast = facts(model.attrs)
            with monkeypatch.context() as patch:
                patch.setattr(model_class, "_RECORDED_CALLS", Everything())
                del model.__dict__["attrs"]
                plain = facts(model.attrs)
            assert fast == plain, (path, model.name)
            checked += bool(fast)
            for fn in model.all_methods:
                for node in fn.nodes(ast.Assign):  # a plain-name target binds no `self.<name>`
                    assert not [b for t in node.targets if isinstance(t, ast.Name)
                                for b in model_class._self_bindings(t, node.value, fn)]
                expected = local_values_by_hand(fn)
                got = fn.local_values
                assert list(got) == list(expected), (path, fn.name)
                assert all([ast.dump(v) for v in got[k]] == [ast.dump(v) for v in expected[k]] for k in got)
    assert checked > 50  # the fixtures' classes have attribute facts to compare


def _summary(module, classes=(), aliases=None):
    return FileResult(f"{module}.py", module, classes=[_cls(q, b) for q, b in classes], aliases=aliases or {})


def _cls(qualname, bases):
    from dpcheck.analysis.file import ClassSummary

    return ClassSummary(qualname, tuple(bases))


def test_a_loader_that_cannot_answer_yet_is_asked_again():
    answers = {"pkg.base": Pending("pkg.base")}
    asked = []

    def load(module):
        asked.append(module)
        answer = answers.get(module)
        if isinstance(answer, Exception):
            raise answer
        return answer

    index = ClassIndex([_summary("pkg.model", [("pkg.model.Net", ["pkg.base.Base"])])], load)
    with pytest.raises(Pending):
        index.is_module("pkg.model.Net")
    assert asked == ["pkg.base"]
    index.add(_summary("pkg.base", [("pkg.base.Base", ["torch.nn.Module"])]))
    assert index.is_module("pkg.model.Net")
    assert asked == ["pkg.base"]  # in the index now: not loaded again


def test_the_layers_a_model_builds_from_an_unscanned_module_are_summarised_in_the_pool(tmp_path, monkeypatch):
    """Settling looks up the class of every layer a file builds (whether a finding's class is an
    offline leftover): a layer defined outside the scan is summarised while files run."""
    from dpcheck import engine
    from dpcheck.registry import all_rules

    (tmp_path / "pkg" / "models").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "layers.py").write_text("import torch.nn as nn\n\n\nclass Block(nn.Module):\n    pass\n")
    paths = []
    for i in range(20):
        path = tmp_path / "pkg" / "models" / f"model{i:02}.py"
        path.write_text(textwrap.dedent(f'''
            import torch.nn as nn
            from pkg.layers import Block

            __all__ = ["Model{i}"]


            class Model{i}(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.block = Block()
                    self.steps = 0

                def forward(self, x):
                    self.steps += 1
                    return self.block(x)
        '''))
        paths.append(path)
    summaries = engine.ModuleSummaries([str(p) for p in paths])
    results, _ = engine.analyze_files(paths, [r.code for r in all_rules()], jobs=2, summaries=summaries)

    def refuse(path, module):
        raise AssertionError(f"{module} summarised after the pool")

    monkeypatch.setattr(engine, "summarize_module", refuse)
    run = engine.settle(results, summaries=summaries)
    assert sorted(Path(f.filename).name for f in run.findings if f.code == "DP101") == [p.name for p in paths]
    assert summaries.take("pkg.layers", str(tmp_path / "pkg" / "layers.py")) is not None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


def test_the_generated_walk_is_compiled_only_for_runs_of_many_files(tmp_path):
    """Compiling it costs a third of a one-file run: one file is walked by hand (the same
    results), a run of many files compiles it once, before its pool forks."""
    import subprocess

    for i in range(20):
        (tmp_path / f"m{i:02}.py").write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    probe = textwrap.dedent(f'''
        import sys
        from pathlib import Path
        from dpcheck import engine
        import dpcheck.analysis.tree as tree
        files = sorted(Path({str(tmp_path)!r}).glob("*.py"))
        engine.analyze_files(files[:int(sys.argv[1])], ["DP101"], jobs=1)
        print(tree._VISITORS is not None)
    ''')
    compiled = [subprocess.run([sys.executable, "-c", probe, str(n)], capture_output=True, text=True,
                               cwd=REPO, check=True).stdout.strip() for n in (1, 20)]
    assert compiled == ["False", "True"]


def _walk_code_at(tmp_path, monkeypatch):
    """``_compiled_walk`` keeping its code under ``tmp_path`` (as if the package lived there)."""
    from dpcheck.analysis import tree

    kept = tmp_path / "__pycache__" / "walk.bin"
    monkeypatch.setattr("importlib.util.cache_from_source", lambda path: str(kept))
    return tree, kept


def test_the_compiled_walk_is_kept_and_read_back_by_a_later_run(tmp_path, monkeypatch):
    """A cold run over many files waited 40 to 70 ms for the walk's compilation before its
    workers started; the code is kept beside dpcheck's bytecode and a later run reads it back."""
    tree, kept = _walk_code_at(tmp_path, monkeypatch)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    source, _ = tree._visitors_source()
    first = tree._compiled_walk(source)
    assert kept.is_file()

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(tree, "compile", no_compile, raising=False)
    again = tree._compiled_walk(source)
    assert again.co_code == first.co_code and again.co_filename == first.co_filename
    namespace = {}
    exec(again, namespace)  # noqa: S102 - the walk's own code
    make_visitors = namespace["_make_visitors"]
    # The code read back walks like the walk by hand.
    module = ast.parse(EVERY_SHAPE)
    saved = tree._VISITORS
    try:
        tree._VISITORS = make_visitors, tree._visitors_source()[1]
        assert _walk_recursively(module) == _walk_with_stack(module)
    finally:
        tree._VISITORS = saved


def test_a_kept_walk_of_another_source_or_interpreter_is_compiled_again(tmp_path, monkeypatch):
    import marshal

    tree, kept = _walk_code_at(tmp_path, monkeypatch)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    source, _ = tree._visitors_source()
    kept.parent.mkdir()
    stale = compile("def _make_visitors(*args):\n    raise AssertionError('stale')\n", "x", "exec")
    for version, kept_source in ((sys.version, "# another grammar\n" + source), ("2.7.18", source)):
        kept.write_bytes(marshal.dumps((version, kept_source, stale)))
        code = tree._compiled_walk(source)
        assert code.co_filename == tree._WALK_FILENAME  # compiled from the source, not the stale code
        assert marshal.loads(kept.read_bytes())[:2] == (sys.version, source)  # and kept in its place
    kept.write_bytes(b"not marshal data")
    assert tree._compiled_walk(source).co_filename == tree._WALK_FILENAME


def test_the_walk_is_not_kept_where_bytecode_is_not_written(tmp_path, monkeypatch):
    tree, kept = _walk_code_at(tmp_path, monkeypatch)
    source, _ = tree._visitors_source()
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    tree._compiled_walk(source)
    assert not kept.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)

    def refused(*args):
        raise PermissionError("read-only")

    monkeypatch.setattr(tree.os, "replace", refused)  # a folder that cannot be written
    assert tree._compiled_walk(source).co_filename == tree._WALK_FILENAME
    assert not kept.exists() and not list(kept.parent.iterdir())  # nothing left behind


def test_shared_text_and_constant_facts_equal_their_plain_readings():
    """The per-file answers shared since cold round 37 equal what each caller computed apart: the
    training-token text test, the identifier string constants (the mentions read them all, the
    bare-call summary the capitalised ones), a name's assignments in its scope sliced from the
    walk's per-type list, and the `"module."` constants picked in C."""
    from dpcheck.analysis import checkpoints
    from dpcheck.analysis.bare_calls import identifier_constants
    from dpcheck.analysis.scripts import TRAINING_TOKENS, mentions_training_token

    sliced = 0
    for path, ctx in _fixture_contexts():
        text = ctx.source.text
        assert mentions_training_token(ctx) == any(token in text for token in TRAINING_TOKENS), path
        constants = [node.value for node in ctx.nodes(ast.Constant)]
        assert identifier_constants(ctx) == {v for v in constants if v.__class__ is str and v.isidentifier()}, path
        for name in ctx.nodes(ast.Name):
            scope = ctx.enclosing(name, (ast.FunctionDef, ast.AsyncFunctionDef))
            nodes = ctx.tree_index.subtree(scope) if scope is not None else ctx.nodes(ast.Assign)
            plain = [n.value for n in nodes if isinstance(n, ast.Assign)
                     and any(isinstance(t, ast.Name) and t.id == name.id for t in n.targets)]
            assert checkpoints._local_values(name, ctx) == plain, (path, name.id, name.lineno)
            sliced += scope is not None and bool(plain)
        strips = checkpoints._prefix_strips(ctx)
        assert [n for n in strips if isinstance(n, ast.Constant)] == \
            [n for n in ctx.nodes(ast.Constant) if n.value == checkpoints._PREFIX], path
    assert sliced > 100  # the fixtures' functions assign the names they read
