"""Unit tests for the facts modules the rules stand on: the tree index, import resolution
and source positions / noqa."""

import ast
import textwrap

import pytest

from dpcheck.analysis.names import ImportMap, dotted, module_aliases, module_name_for, self_attr, self_attr_root
from dpcheck.analysis.source import ALL_CODES, SourceFile, suppressed
from dpcheck.analysis.tree import FunctionInfo, TreeIndex, statement_nodes


def parse(code):
    return ast.parse(textwrap.dedent(code))


def preorder(node):
    """The reference walk: a node, then each child's subtree in field order (no ctx/op singletons)."""
    out = [node]
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)):
            out.extend(preorder(child))
    return out


SAMPLE = """
import torch

class Net(torch.nn.Module):
    @staticmethod
    def helper(a, b=1 + 2):
        return [a, b] if a else -b

    def forward(self, x):
        y = self.fc(x)
        return y * 2
"""


# ---------------------------------------------------------------- tree.py: TreeIndex

def test_tree_index_order_is_preorder_in_source_order():
    tree = parse(SAMPLE)
    index = TreeIndex(tree)
    assert index.order == preorder(tree)
    assert index.order[0] is tree
    assert all(index.position[n] == i for i, n in enumerate(index.order))


def test_tree_index_leaves_out_shared_singletons():
    index = TreeIndex(parse(SAMPLE))
    singletons = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)
    assert not [n for n in index.order if isinstance(n, singletons)]
    assert index.by_type[ast.BinOp] and index.by_type[ast.Name]


def test_tree_index_parents():
    tree = parse(SAMPLE)
    index = TreeIndex(tree)
    assert tree not in index.parents
    for node in index.order[1:]:
        parent = index.parents[node]
        assert any(child is node for child in ast.iter_child_nodes(parent))
    forward = next(n for n in index.by_type[ast.FunctionDef] if n.name == "forward")
    assert isinstance(index.parents[forward], ast.ClassDef)


def test_tree_index_subtree_is_the_nodes_preorder_slice():
    tree = parse(SAMPLE)
    index = TreeIndex(tree)
    for node in index.order:
        assert index.subtree(node) == preorder(node)
    cls = index.by_type[ast.ClassDef][0]
    assert index.subtree(cls)[0] is cls
    assert len(index.subtree(cls)) == len(list(ast.walk(cls))) - sum(
        isinstance(n, (ast.expr_context, ast.operator, ast.unaryop)) for n in ast.walk(cls))


def test_tree_index_by_type_in_source_order():
    index = TreeIndex(parse("a = 1\nb = 2\nif a:\n    c = 3\n"))
    assert [t.id for a in index.by_type[ast.Assign] for t in a.targets] == ["a", "b", "c"]


STATEMENTS = """
import os
try:
    from torch import nn
except ImportError:
    import torch.nn as nn
else:
    class InElse: pass
finally:
    import sys
class Outer(nn.Module):
    class Inner:
        import json
    def forward(self, x):
        import math
        with ctx():
            class Local: pass
        match x:
            case 1:
                class InCase: pass
        return (lambda: x)()
"""


def test_statement_nodes_match_the_full_walk_for_statements():
    """Imports and classes come from the statements only walk: the same nodes, in the same
    order, as the full walk finds them (classes and imports are never inside expressions)."""
    tree = parse(STATEMENTS)
    full = TreeIndex(tree).by_type
    found = statement_nodes(tree)
    for kind in (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.Try, ast.Match):
        assert found[kind] == full[kind], kind
    assert [c.name for c in found[ast.ClassDef]] == ["InElse", "Outer", "Inner", "Local", "InCase"]
    assert ast.Call not in found and ast.Name not in found


def test_tree_index_walks_on_first_use():
    tree = parse(SAMPLE)
    index = TreeIndex(tree)
    assert "order" not in vars(index)
    assert index.size[0] == len(index.order) == len(preorder(tree))
    assert "order" in vars(index)
    with pytest.raises(AttributeError):
        index.not_a_result  # noqa: B018


def test_tree_index_deeper_than_the_call_stack_falls_back_to_its_own_stack():
    from dpcheck.analysis.tree import _walk_recursively, _walk_with_stack

    tree = parse(SAMPLE)
    assert _walk_recursively(tree) == _walk_with_stack(tree)
    node = ast.Constant(1)
    for _ in range(3000):  # deeper than the recursion limit (ast.parse itself stops short of it)
        node = ast.UnaryOp(ast.USub(), node)
    deep = ast.Expression(node)
    with pytest.raises(RecursionError):
        _walk_recursively(deep)
    index = TreeIndex(deep)
    assert len(index.order) == 3002 and index.order[-1] is index.by_type[ast.Constant][0]
    assert index.size[0] == 3002 and index.size[1] == 3001
    assert index.subtree(index.by_type[ast.UnaryOp][-1]) == index.order[-2:]


# ---------------------------------------------------------------- tree.py: FunctionInfo

DECORATED = """
@decorator(deco_arg)
def forward(self, x: AnnotationName = default_value, *rest: RestAnn) -> ReturnAnn:
    y = x + self.weight
    def inner(z):
        return z * inner_only
    square = lambda v: v * lambda_only
    if y:
        return y
    return square(y)
"""


def _function(code, name, with_index=True):
    tree = parse(code)
    index = TreeIndex(tree)
    node = next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name == name)
    return FunctionInfo(node, None, index if with_index else None), index


@pytest.mark.parametrize("with_index", [True, False])
def test_function_nodes_are_the_body_only(with_index):
    info, _ = _function(DECORATED, "forward", with_index)
    names = {n.id for n in info.nodes(ast.Name)}
    assert {"x", "y", "self", "z", "inner_only", "v", "lambda_only", "square"} <= names
    for outside in ("decorator", "deco_arg", "AnnotationName", "default_value", "RestAnn", "ReturnAnn"):
        assert outside not in names
    # Nested functions' bodies are part of the body (rules see them); the signature is not.
    assert [n.name for n in info.nodes(ast.FunctionDef)] == ["inner"]
    assert {a.arg for a in info.nodes(ast.arg)} == {"z", "v"}


def test_function_nodes_of_several_types_and_parent():
    info, index = _function(DECORATED, "forward")
    found = list(info.nodes(ast.Return, ast.Lambda))
    assert [type(n) for n in found] == [ast.Return, ast.Return, ast.Return, ast.Lambda]
    lam = found[-1]
    assert isinstance(info.parent(lam), ast.Assign)
    assert info.parent(index.order[0]) is None


EVERY_KIND_OF_FIELD = """
from .pkg import a as b, c
import x.y as z
global_name = {**base, "k": f"{v!r:>{width}}"}
def outer(p, /, q=1, *r, s, t=2, **u):
    global g
    try:
        with open(p) as h, ctx() as (i, j):
            yield [w async for w in q if w] or {k: v for k, v in u.items()}
    except (OSError, ValueError) as err:
        raise RuntimeError(err) from None
    finally:
        del q
    match p:
        case Point(x=0, y=yy) | [1, *rest] | {"k": kk, **others}:
            return lambda m=1: m + yy
        case str() as name if name:
            pass
    class Inner(Base, metaclass=Meta):
        attr: int = 3
        def method(self):
            return super().method() if self else not self
"""


def test_tree_index_walks_every_node_holding_field():
    # The walk reads only the fields the grammar says may hold nodes: it must still reach
    # everything the reference walk (ast.iter_child_nodes) reaches, in the same order.
    tree = parse(EVERY_KIND_OF_FIELD)
    assert TreeIndex(tree).order == preorder(tree)


def test_nodes_of_a_type_within_a_subtree_or_a_function_body():
    tree = parse(EVERY_KIND_OF_FIELD)
    index = TreeIndex(tree)
    types = {type(n) for n in index.order}
    for node in index.order:
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Lambda, ast.match_case)):
            continue
        for t in types:
            assert index.nodes_within(node, t) == [n for n in preorder(node) if type(n) is t]
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            info = FunctionInfo(node, None, index)
            body = node.body if isinstance(node.body, list) else [node.body]
            for t in types:
                assert list(info.nodes(t)) == [n for stmt in body for n in preorder(stmt) if type(n) is t]


def test_returns_exclude_nested_functions_and_lambdas():
    info, _ = _function(DECORATED, "forward")
    values = list(info.returns())
    assert [ast.unparse(v) for v in values] == ["y", "square(y)"]


def test_returns_of_a_lambda_and_a_bare_return():
    tree = parse("f = lambda t: t + 1\ndef g():\n    return\n")
    lam = next(n for n in ast.walk(tree) if isinstance(n, ast.Lambda))
    assert [ast.unparse(v) for v in FunctionInfo(lam, None, TreeIndex(tree)).returns()] == ["t + 1"]
    g = tree.body[1]
    assert list(FunctionInfo(g, None, TreeIndex(tree)).returns()) == []


def test_self_name_and_self_attr():
    info, _ = _function("def forward(this, x):\n    return this.w + x.w\n", "forward")
    assert info.self_name == "this"
    attrs = [info.self_attr(n) for n in info.nodes(ast.Attribute)]
    assert attrs == ["w", None]
    static, _ = _function("def f():\n    return 1\n", "f")
    assert static.self_name == "self"


def test_local_values_follow_tuple_unpacking_and_augmented_assignment():
    info, _ = _function("def f(self):\n    a, b = 1, 2\n    a += 3\n    c, *d = pair()\n", "f")
    values = {k: [ast.unparse(v) for v in vs] for k, vs in info.local_values.items()}
    assert values["a"] == ["1", "a + 3"]
    assert values["b"] == ["2"]
    assert values["c"] == ["pair()[0]"]
    assert "d" not in values  # a starred target has no single value


def test_fact_is_computed_once_per_object():
    info, _ = _function(SAMPLE, "forward")
    other, _ = _function(SAMPLE, "forward")
    calls = []

    def count_names(fn):
        calls.append(fn)
        return len(list(fn.nodes(ast.Name)))

    first = info.fact(count_names)
    assert info.fact(count_names) == first == 4  # y, self, x (line 1), y (the return)
    assert calls == [info]
    other.fact(count_names)
    assert calls == [info, other]  # a memo per object, not shared

    def other_fact(fn):
        return "different"

    assert info.fact(other_fact) == "different"  # keyed by the computing function
    assert info.fact(count_names) == first and len(calls) == 2


# ---------------------------------------------------------------- names.py

def resolve(code, expr, module="pkg.mod", is_package=False):
    imports = ImportMap(parse(code), module, is_package)
    return imports.resolve(ast.parse(expr, mode="eval").body)


@pytest.mark.parametrize("code, expr, expected", [
    ("import torch.nn as nn", "nn.Linear", "torch.nn.Linear"),
    ("import torch", "torch.nn.Module", "torch.nn.Module"),
    ("import torch.nn", "torch.nn.Conv2d", "torch.nn.Conv2d"),
    ("from torch import nn", "nn.Conv2d", "torch.nn.Conv2d"),
    ("from torch import nn as tnn", "tnn.parallel.DataParallel", "torch.nn.parallel.DataParallel"),
    ("from torch.nn import Module as M", "M", "torch.nn.Module"),
    ("from torch.nn.parallel import DataParallel", "DataParallel", "torch.nn.parallel.DataParallel"),
    # An import inside a function counts too; a later import of a name wins.
    ("def f():\n    import numpy as np", "np.zeros", "numpy.zeros"),
    ("import numpy as x\nimport torch as x", "x.zeros", "torch.zeros"),
    # Unimported names are this module's own; builtins we reason about stay bare.
    ("", "Block", "pkg.mod.Block"),
    ("", "super", "super"),
    ("", "setattr", "setattr"),
])
def test_import_map_resolves(code, expr, expected):
    assert resolve(code, expr) == expected


@pytest.mark.parametrize("code, module, is_package, expected", [
    ("from .base import Base", "pkg.sub.blocks", False, "pkg.sub.base.Base"),
    ("from ..util import Base", "pkg.sub.blocks", False, "pkg.util.Base"),
    ("from . import Base", "pkg.sub.blocks", False, "pkg.sub.Base"),
    ("from .base import Base", "pkg.sub", True, "pkg.sub.base.Base"),  # in pkg/sub/__init__.py
    ("from ..base import Base", "pkg.sub", True, "pkg.base.Base"),
    ("from .base import Thing as Base", "top", False, "base.Thing"),  # a loose file: no package
])
def test_import_map_relative_imports(code, module, is_package, expected):
    assert resolve(code, "Base", module, is_package) == expected


def test_star_imports_are_not_followed():
    # `from torch.nn import *` binds names we cannot see without importing: they stay local.
    assert resolve("from torch.nn import *", "Linear") == "pkg.mod.Linear"
    assert "*" not in ImportMap(parse("from torch.nn import *"), "pkg.mod").aliases


def test_module_aliases_are_names_the_top_level_binds_once_to_another_name():
    code = """
from models import common
from models.common import Conv as C

class DetectionModel: pass
Model = DetectionModel
Block = common.Bottleneck
Layer = C
Twice = DetectionModel
try:
    Fallback = DetectionModel
except ImportError:
    Fallback = None
Twice = common.Bottleneck
def f():
    Inner = DetectionModel
Count = 3
"""
    imports = ImportMap(parse(code), "pkg.mod")
    assert module_aliases(parse(code), imports) == {
        "Model": "pkg.mod.DetectionModel", "Block": "models.common.Bottleneck", "Layer": "models.common.Conv"}


def test_resolve_gives_none_for_non_name_chains():
    assert resolve("import torch", "make().weight") is None
    assert resolve("import torch", "x[0].y") is None


def test_dotted_and_self_attr_helpers():
    expr = ast.parse("self.blocks[0].fc.weight", mode="eval").body
    assert dotted(ast.parse("a.b.c", mode="eval").body) == "a.b.c"
    assert dotted(expr) is None
    assert self_attr(ast.parse("self.fc", mode="eval").body) == "fc"
    assert self_attr(ast.parse("self.fc.w", mode="eval").body) is None
    assert self_attr_root(expr) == "blocks"
    assert self_attr_root(ast.parse("other.fc", mode="eval").body) is None


def test_module_name_for_packages(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text("")
    (tmp_path / "loose.py").write_text("")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "inside.py").write_text("")
    assert module_name_for(pkg / "sub" / "mod.py") == "pkg.sub.mod"
    assert module_name_for(pkg / "sub" / "__init__.py") == "pkg.sub"
    assert module_name_for(pkg / "__init__.py") == "pkg"
    assert module_name_for(tmp_path / "loose.py") == "loose"
    assert module_name_for(tmp_path / "plain" / "inside.py") == "inside"  # a folder without __init__


# ---------------------------------------------------------------- source.py

def test_span_counts_characters_on_non_ascii_lines():
    text = 'label = "ünïcødé"; y = self.fc(x)\nz = self.fc(x)\n'
    source = SourceFile("f.py", text)
    tree = ast.parse(text)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    first, second = sorted(calls, key=lambda n: n.lineno)
    # ast gives UTF-8 byte offsets: four 2-byte characters before the call on line 1.
    assert first.col_offset == text.splitlines()[0].index("self.fc") + 4
    col = text.splitlines()[0].index("self.fc")
    assert source.span(first) == (1, col, 1, col + len("self.fc(x)"))
    assert source.span(second) == (2, 4, 2, 14)  # ASCII lines: bytes are characters


def test_span_of_a_multiline_node_and_char_column_past_the_end():
    text = 'x = f(\n    "é",\n    1)\n'
    source = SourceFile("f.py", text)
    call = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call))
    assert source.span(call) == (1, 4, 3, 6)
    assert source.char_column(2, len('    "é"'.encode())) == len('    "é"')
    assert source.line(99) == "" and source.line(0) == ""


@pytest.mark.parametrize("line, expected", [
    ("x = 1  # noqa", {ALL_CODES}),
    ("x = 1  # noqa: DP101", {"DP101"}),
    ("x = 1  # noqa: DP101,DP102", {"DP101", "DP102"}),
    ("x = 1  # noqa: DP101, DP102", {"DP101", "DP102"}),
    ("x = 1  # NOQA:dp101", {"DP101"}),
    ("x = 1  # noqa: E501, DP101  # a reason", {"E501", "DP101"}),
    ("x = 1  # noqa: DP102  # expect: DP101", {"DP102"}),
    ("x = 1  # a comment", None),
    ("x = 1", None),
])
def test_noqa_codes(line, expected):
    codes = SourceFile("f.py", f"{line}\n").noqa_codes(1)
    assert codes == (None if expected is None else frozenset(expected))


def test_noqa_inside_a_string_is_not_a_comment():
    # Comments are found by token: a string that contains `# noqa` silences nothing.
    assert SourceFile("f.py", 's = "# noqa"\n').noqa_codes(1) is None
    assert SourceFile("f.py", 's = "# noqa"  # noqa: DP101\n').noqa_codes(1) == frozenset({"DP101"})


@pytest.mark.parametrize("text, expected", [
    ("# dpcheck: noqa\nimport torch\n", {ALL_CODES}),
    ("import torch\n# dpcheck: noqa: DP101,DP102\n", {"DP101", "DP102"}),
    ("#dpcheck:noqa:dp101\n", {"DP101"}),
    ("# dpcheck: noqa: DP101\n# dpcheck: noqa: DP203\n", {"DP101", "DP203"}),
    ("import torch  # dpcheck: noqa\n", set()),  # only on a line of its own
    ('s = """\n# dpcheck: noqa\n"""\n', set()),  # only in a comment
    ("# dpcheck is great\n", set()),
    ("import torch\n", set()),
])
def test_file_level_noqa(text, expected):
    assert SourceFile("f.py", text).file_noqa == frozenset(expected)


def test_suppressed():
    assert suppressed("DP101", frozenset({ALL_CODES}))
    assert suppressed("DP101", frozenset({"DP101", "DP102"}))
    assert not suppressed("DP103", frozenset({"DP101"}))
    assert not suppressed("DP101", frozenset())
    assert not suppressed("DP101", None)


def test_a_files_analysis_leaves_no_reference_cycles():
    """Each file's tree and facts are freed by reference counting when its analysis ends; a cycle
    (a recursive closure, a fact that refers back to its context) would leave the whole tree to
    the cyclic collector, which then re-scans it: a large share of a cold run's time."""
    import gc
    from pathlib import Path

    from dpcheck.analysis.file import analyze_path
    from dpcheck.registry import all_rules

    rules = [rule() for rule in all_rules()]
    fixtures = sorted((Path(__file__).parent.parent / "fixtures").rglob("*.py"))
    assert fixtures
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds unreachable goes to gc.garbage
    try:
        for path in fixtures:
            analyze_path(path, str(path), rules)
            gc.collect()
            # (The standard library's ast.dump leaves a small cycle of its own, holding no node.)
            assert not [o for o in gc.garbage if isinstance(o, ast.AST)], path
            gc.garbage.clear()
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if collecting:
            gc.enable()


def test_nodes_under_reads_the_walk_and_walks_nodes_built_on_the_fly():
    tree = parse(EVERY_KIND_OF_FIELD)
    index = TreeIndex(tree)
    outer = next(n for n in index.order if isinstance(n, ast.FunctionDef) and n.name == "outer")
    info = FunctionInfo(outer, None, index)
    for node in index.subtree(outer):
        for t in (ast.Name, ast.Attribute, ast.Call):
            assert info.nodes_under(node, t) == [n for n in preorder(node) if type(n) is t]
    # A node no walk met (as local_values builds for `x += y`): walked on its own.
    built = ast.BinOp(ast.Name("a", ast.Load()), ast.Add(), ast.Attribute(ast.Name("b", ast.Load()), "c", ast.Load()))
    assert sorted(n.id for n in info.nodes_under(built, ast.Name)) == ["a", "b"]
    assert [n.attr for n in info.nodes_under(built, ast.Attribute)] == ["c"]


def test_a_star_import_stands_for_the_pytorch_names_the_module_does_not_import():
    # `from layers import *` (layers.py imports torch.nn as nn): nn, F and torch are PyTorch's.
    assert resolve("from layers import *", "nn.Module") == "torch.nn.Module"
    assert resolve("from .layers import *", "F.relu") == "torch.nn.functional.relu"
    assert resolve("from layers import *", "torch.ones") == "torch.ones"
    # An import of its own wins, and without a star import the names stay local.
    assert resolve("from layers import *\nimport mxnet.gluon.nn as nn", "nn.Block") == "mxnet.gluon.nn.Block"
    assert resolve("import os", "nn.Module") == "pkg.mod.nn.Module"


def _first_function(code):
    tree = parse(code)
    index = TreeIndex(tree)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    return FunctionInfo(node, None, index)


def test_a_tensor_sized_by_a_leading_shape_keeps_the_batch_in_dim_0():
    from dpcheck.analysis.dataflow import batch_derived

    derived = batch_derived(_first_function("""
        def forward(x, q):
            by_shape = torch.ones(q.size()[:-1])
            by_whole = torch.zeros(x.shape)
            by_length = torch.arange(x.shape[1])
            by_tail = torch.ones(q.shape[1:])
            mask = torch.cat([by_shape, x], dim=1)
    """))
    assert derived["by_shape"] and derived["by_whole"] and derived["mask"]
    assert not derived["by_length"] and not derived["by_tail"]


def test_a_reorder_keeps_the_batch_in_dim_0_only_when_dim_0_stays_first():
    from dpcheck.analysis.dataflow import batch_derived

    derived = batch_derived(_first_function("""
        def forward(x):
            kept_permute = x.permute(0, 2, 1)
            kept_tuple = x.permute((0, 3, 1, 2))
            kept_swap = x.transpose(1, 2)
            kept_module_swap = torch.transpose(x, 2, 1)
            moved_permute = x.permute(2, 0, 1)
            moved_swap = x.transpose(0, 1)
            negative_swap = x.transpose(-1, -2)
            by_name = x.permute(*order)
            by_keyword = x.transpose(dim0=1, dim1=2)
            flipped = x.t()
    """))
    assert all(derived[n] for n in ("kept_permute", "kept_tuple", "kept_swap", "kept_module_swap"))
    # A negative dim is dim 0 of a rank-2 tensor; other orders are not known to keep it.
    assert not any(derived[n] for n in ("moved_permute", "moved_swap", "negative_swap", "by_name",
                                        "by_keyword", "flipped"))


def test_numpy_axis_keyword_names_the_dim_as_dim_does():
    """torch takes NumPy's `axis=` for `dim=`: a stack on axis 1 keeps the batch in dim 0, a stack on
    axis 0 (or with no dim) makes a new leading dim, and a reduction over axis 0 leaves the batch."""
    from dpcheck.analysis.dataflow import batch_derived

    derived = batch_derived(_first_function("""
        def forward(x, y):
            stacked_behind = torch.stack([x, y], axis=1)
            stacked_behind_dim = torch.stack([x, y], dim=1)
            stacked_in_front = torch.stack([x, y], axis=0)
            stacked_default = torch.stack([x, y])
            batch_total = x.sum(axis=0)
            sample_total = x.sum(axis=1)
    """))
    assert derived["stacked_behind"] and derived["stacked_behind_dim"] and derived["sample_total"]
    assert not derived["stacked_in_front"] and not derived["stacked_default"] and not derived["batch_total"]


def test_straight_line_value_is_the_last_assignment_of_the_body_before_the_use():
    from dpcheck.analysis.dataflow import UNASSIGNED, straight_line_value

    fn = _first_function("""
        def forward(x, flag):
            y = x.permute(2, 0, 1)
            z = y
            y = y.float()
            if flag:
                w = 1
            else:
                w = 2
            for k in range(2):
                v = use(v)
            return z, y, w, x, v
    """)
    names = {n.id: n for n in next(iter(fn.returns())).elts}
    assert ast.unparse(straight_line_value(fn, names["z"])) == "y"
    assert ast.unparse(straight_line_value(fn, names["y"])) == "y.float()"
    assert straight_line_value(fn, names["w"]) is None  # set in a branch
    assert straight_line_value(fn, names["v"]) is None  # set in a loop
    assert straight_line_value(fn, names["x"]) is UNASSIGNED


def test_parameter_properties_are_getters_that_take_the_first_parameter():
    from conftest import file_context

    from dpcheck.analysis.model_class import parameter_properties

    ctx = file_context("""
        import torch.nn as nn

        class ModelBase(nn.Module):
            @property
            def device(self):
                return next(self.parameters()).device

            @property
            def first_name(self):
                return next(self.named_parameters())[0]

            @property
            def dtype(self):
                try:
                    return next(self.parameters()).dtype
                except StopIteration:
                    return None

            @property
            def fallback(self):
                return next(self.parameters(), None)

            def get_device(self):
                return next(self.parameters()).device

        class Plain(nn.Module):
            @property
            def device(self):
                return self.anchor.device
    """, module="pkg.base")
    assert parameter_properties(ctx) == {"pkg.base.ModelBase": ["device", "first_name"]}


def _checkpoint_loads(source):
    from conftest import file_context

    from dpcheck.analysis.checkpoints import summarize_checkpoint_loads
    from dpcheck.analysis.file import FileResult

    result = FileResult("m.py", "m")
    summarize_checkpoint_loads(file_context(source), result)
    return result.checkpoint_loads


def test_checkpoint_loads_tell_a_wrapper_from_a_bare_model():
    wrapped_first = """
        import torch
        import torch.nn as nn

        def test(net, path):
            model = nn.DataParallel(net).cuda()
            model.load_state_dict(torch.load(path))
            optimizer = torch.optim.Adam(model.parameters())
            optimizer.load_state_dict(torch.load(path + ".optim"))
            scheduler.load_state_dict(torch.load(path)["scheduler"])
    """
    assert _checkpoint_loads(wrapped_first) == "wrapped"
    assert _checkpoint_loads("""
        import torch

        def demo(net, path):
            net.load_state_dict(torch.load(path))
    """) == "bare"
    # Loaded before it is wrapped, and into `.module`: the bare model's keys.
    assert _checkpoint_loads("""
        import torch
        import torch.nn as nn

        def test(net, path, other):
            net.load_state_dict(torch.load(path))
            model = nn.DataParallel(net)
            model.module.load_state_dict(torch.load(path))
            other = nn.DataParallel(other)
            other.load_state_dict(torch.load(path))
    """) == "bare wrapped"
    # Keys with the prefix taken off, or weights that are no checkpoint file: not a load as they are.
    assert _checkpoint_loads("""
        import torch

        def demo(net, path, url):
            net.load_state_dict({k[7:]: v for k, v in torch.load(path).items()})
            net.load_state_dict(torch.hub.load_state_dict_from_url(url))
    """) == ""


def test_forward_flags_are_attributes_of_self_that_forward_compares_with_strings():
    from conftest import file_context

    from dpcheck.analysis.model_class import forward_flags

    ctx = file_context("""
        import torch.nn as nn

        class SpecNet(nn.Module):
            def forward(self, x):
                assert self.stage in ("a", "b")
                if self.forward_mode == "cnn" and not self.frozen:
                    x = self.cnn(x)
                while "skip" != self.block_type:
                    x = self.block(x)
                y = x if self.mode != "encoder" else None
                if self.use_aux or self.depth > 2 or self.cfg.kind == "x" or self.kinds == ["a", 1]:
                    x = x + 1
                return x, y, self.temperature == "high"

            def generate(self, x):
                if self.decoding == "beam":
                    return x
                return x

        class Plain(nn.Module):
            def forward(self, x):
                return self.proj(x) * self.scale

        class Head(Plain):
            pass
    """, module="pkg.nets")
    assert forward_flags(ctx) == {"pkg.nets.SpecNet": ["block_type", "forward_mode", "mode", "stage"]}


def _mentions(source, module="pkg.models"):
    from conftest import file_context

    from dpcheck.analysis.file import FileResult
    from dpcheck.analysis.mentions import summarize_mentions
    from dpcheck.analysis.wrapping import unnamed_classes

    ctx = file_context(source, module=module)
    result = FileResult("models.py", module)
    summarize_mentions(ctx, ctx.fact(unnamed_classes), result)
    return result


def test_unnamed_classes_are_the_files_own_classes_it_never_names():
    result = _mentions("""
        import torch.nn as nn
        from .layers import Block

        class Used(nn.Module):
            def forward(self, x):
                return Block()(x)

        class Leftover(nn.Module):
            def __init__(self):
                super(Leftover, self).__init__()

            def forward(self, x):
                if isinstance(x, Leftover):
                    return x
                return x

        class Tested(nn.Module):
            pass

        @register
        class Registered(nn.Module):
            pass

        class lowercase(nn.Module):
            pass

        class Looked(nn.Module):
            pass

        def build():
            return Used()

        def init(m):
            if isinstance(m, Tested):
                return m

        TABLE = {"looked": "Looked"}
    """)
    # Named only inside its own body, or as the type an isinstance test checks: unnamed. A
    # decorated class, a lower-case one and one a string names are not candidates.
    assert result.unnamed == ["pkg.models.Leftover", "pkg.models.Tested"]
    # What another file's class could be named here: not the imported Block (its import carries
    # it), not the file's own classes; the attribute and the string are kept.
    assert "Block" not in result.mentions and "Used" not in result.mentions
    assert result.builds_by_name is False


def test_a_file_that_declares_all_leaves_its_classes_to_the_offline_summary():
    result = _mentions("""
        import torch.nn as nn
        __all__ = ["Net"]

        class Net(nn.Module):
            pass

        class Helper(nn.Module):
            pass
    """)
    assert result.unnamed == []


def test_mentions_are_names_attributes_and_identifier_strings():
    result = _mentions("""
        import losses
        from .registry import *

        criterion = losses.VGGLoss()
        head = StarHead()
        NAME = "ConfigChosen"
        TEXT = "not an identifier"
    """)
    assert {"VGGLoss", "StarHead", "ConfigChosen"} <= set(result.mentions)
    assert "not an identifier" not in result.mentions


@pytest.mark.parametrize("code, by_name, namespaces", [
    # A lookup on an imported module, or in this module's globals, reaches only what that namespace
    # binds: the index settles which classes (ClassIndex._looked_up).
    ("import models\nnet = getattr(models, args.arch)()", False, ["models"]),
    ("net = globals()[args.arch]()", False, ["pkg.models"]),
    ("import models\nnet = vars(models)[args.arch]()", False, ["models"]),
    ("import models\nnet = models.__dict__[args.arch]()", False, ["models"]),
    ("import torchvision.models as tvm\nnet = getattr(tvm, args.arch)()", False, ["torchvision.models"]),
    # Lookups that may reach any class.
    ("import importlib\nnet = getattr(importlib.import_module(path), name)()", True, []),
    ("import importlib\nmodule = importlib.import_module('m.' + n)\nnet = getattr(module, name)()", True, []),
    ("net = eval(args.arch)()", True, []),
    ("import torch.nn as nn\nchoices = {c.__name__: c for c in nn.Module.__subclasses__()}", True, []),
    ("import sys\nnet = getattr(sys.modules[__name__], name)()", True, []),
    ("from hydra.utils import instantiate\nnet = instantiate(cfg.model)", True, []),
    ("import hydra\nnet = hydra.utils.instantiate(cfg.model)", True, []),
    ("import pydoc\nnet = pydoc.locate(cfg.arch)()", True, []),
    # Constant names, objects of the program, a module imported by a computed name whose class
    # is named, and a model's own eval(): no class looked up by a computed name.
    ("import models\nnet = getattr(models, 'Net')()", False, []),
    ("value = getattr(args, key)\nlr = getattr(self, 'lr_' + k)", False, []),
    ("import importlib\nmodule = importlib.import_module('model.' + name)\nnet = module.Net()", False, []),
    ("for k, v in vars(args).items():\n    print(k, v)", False, []),
    ("model.eval()\nstate = self.__dict__['_modules']", False, []),
    # torch's own namespaces hold torch's functions and classes, never the project's (StyleTTS2's
    # `getattr(torch, window)(win_length)`).
    ("import torch\nwindow = getattr(torch, name)(n)", False, []),
    ("import torch.nn as nn\nact = getattr(nn, args.act)()", False, []),
    ("from torch import optim\nopt = getattr(optim, args.opt)(params)", False, []),
    ("import torch\nopt = getattr(torch.optim, args.opt)(params)", False, []),
])
def test_builds_by_name(code, by_name, namespaces):
    result = _mentions(code)
    assert (result.builds_by_name, result.lookup_namespaces) == (by_name, namespaces)


def test_a_file_no_rule_walks_is_read_as_text():
    from dpcheck.analysis.file import analyze_source

    registry = analyze_source("import models\n\ndef make(name):\n    return getattr(models, name)()\n",
                              "registry.py", [], "registry")
    assert registry.builds_by_name
    table = analyze_source("CHOICES = {'vgg': 'VGGLoss'}\n", "table.py", [], "table")
    assert "VGGLoss" in table.mentions and not table.builds_by_name
    # The builtins count where they are called: a word of a docstring or a help string calls nothing.
    prose = analyze_source('"""eval      - dict of {metric: score}"""\nFLAGS = ["--eval", "vars"]\n', "refeval.py", [],
                           "refeval")
    assert not prose.builds_by_name
    assert analyze_source("def score(expr):\n    return eval (expr)\n", "calc.py", [], "calc").builds_by_name
    hydra_entry = analyze_source("from hydra.utils import instantiate\n\ndef main(cfg):\n    return instantiate(cfg.model)\n",
                                 "run.py", [], "run")
    assert hydra_entry.builds_by_name


def test_a_class_no_file_names_is_advice_only_where_the_run_wraps_a_model():
    from conftest import FIXTURES, run_json

    def severities(*paths):
        findings, _ = run_json(*paths, "--select", "DP101")
        return {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]): f["severity"] for f in findings}

    folder = FIXTURES / "unnamed_class"
    # With train.py, which wraps a model: `Leftover` (line 28), named by no file, is advice only.
    assert severities(folder / "models.py", folder / "train.py") == {("models.py", 17): "error",
                                                                     ("models.py", 28): "info"}
    # The model file checked alone shows no wrap: its classes may be what its users wrap.
    assert severities(folder / "models.py") == {("models.py", 17): "error", ("models.py", 28): "error"}

def test_project_wide_answers_do_not_depend_on_which_question_loads_a_module_first():
    """A lookup may summarise a module the run did not scan (a file a pre-commit run left out), whose
    mentions count: `unnamed` asked before and after that load answers as if the load came first
    (the answer was computed once and kept, session 38)."""
    from dpcheck.analysis.file import analyze_source
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.registry import rules_by_code

    rules = [rule() for rule in rules_by_code().values() if rule.kind == "static"]
    train = analyze_source("import torch.nn as nn\nfrom pkg.models import Net\n\n"
                           "model = nn.DataParallel(Net().cuda())\n", "train.py", rules, "train")
    models = analyze_source(textwrap.dedent("""
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                return x

        class Orphan(nn.Module):
            def forward(self, x):
                return x.sum()
    """), "pkg/models.py", rules, "pkg.models")
    extra = "import torch\nfrom pkg import models\nTHING = 1\n\ndef make():\n    return models.Orphan()\n"

    def load(name):
        return analyze_source(extra, "pkg/extra.py", [], "pkg.extra") if name == "pkg.extra" else None

    asked_first = ClassIndex([train, models], load_module=load)
    assert asked_first.unnamed("Orphan")  # no file the index holds names it yet
    asked_first.lookup("pkg.extra.THING")  # summarises pkg/extra.py, which builds one
    loaded_first = ClassIndex([train, models], load_module=load)
    loaded_first.lookup("pkg.extra.THING")
    assert asked_first.unnamed("Orphan") is None
    assert loaded_first.unnamed("Orphan") is None


def test_classes_nothing_builds_and_losses_builders_return_are_advice_whatever_is_wrapped():
    from conftest import FIXTURES, run_json

    def severities(folder):
        findings, _ = run_json(folder, "--select", "DP101")
        return {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]): f["severity"] for f in findings}

    # What train.py wraps is not known (a pickled model), yet nothing builds `LabelLoss` (imported, in
    # `__all__`), `VDiff` (named only in `Picker`, which nothing builds) or nets2's `Causal` (its
    # construction commented out; nets.Net builds nets.Causal): advice only. `SegLoss`, `KDiff` and
    # nets' `Causal` are built: errors.
    assert severities(FIXTURES / "dp101" / "unbuiltpkg") == {
        ("losses.py", 17): "error", ("losses.py", 27): "info", ("nets.py", 17): "info",
        ("nets.py", 30): "error", ("nets.py", 51): "error", ("nets2.py", 13): "info"}
    # `SRLoss` and `KDLoss` come from builders every call of which keeps them on the trainer, only
    # called: advice only. `HintLoss` goes into the wrapped model's constructor: error.
    assert severities(FIXTURES / "dp101" / "returnedlosspkg") == {
        ("losses.py", 16): "info", ("losses.py", 26): "info", ("losses.py", 36): "error"}


def test_a_library_another_subproject_vendors_is_not_what_other_subprojects_import():
    from conftest import FIXTURES, run_json

    findings, _ = run_json(FIXTURES / "dp401" / "vendoredpkg", "--select", "DP401")
    # pretrain/train.py's `transformers` is the installed library, not summary/'s copy: no site
    # reaches the copy. tools/train.py's `models` is lib/'s package (no training script beside it).
    assert {f["filename"].split("vendoredpkg/")[1]: f["severity"] for f in findings} == {
        "summary/transformers/modeling.py": "info", "lib/models/net.py": "error"}


def test_a_class_named_with_a_lower_case_initial_is_never_taken_for_unbuilt():
    """The mentions keep capitalised words only: `models.bicubic()` through a dotted module would not
    show, so such a class is never asked to be unbuilt (SA-PD-SR's `bicubic`)."""
    from dpcheck.analysis.file import analyze_source
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.registry import rules_by_code

    rules = [rule() for rule in rules_by_code().values() if rule.kind == "static"]
    models = analyze_source(textwrap.dedent("""
        import torch.nn as nn

        class bicubic(nn.Module):
            def forward(self, x):
                return x

        class Orphan(nn.Module):
            def forward(self, x):
                return x
    """), "pkg/models.py", rules, "pkg.models")
    train = analyze_source("import torch\nimport torch.nn as nn\nimport pkg.models\n\n"
                           "model = nn.DataParallel(torch.load('m.pt'))\nscale = pkg.models.bicubic()\n",
                           "train.py", rules, "train")
    index = ClassIndex([models, train])
    assert index.unbuilt("pkg/models.py", "Orphan")
    assert index.unbuilt("pkg/models.py", "bicubic") is None


def test_wrapped_attributes_are_attributes_of_other_objects_that_hold_a_wrapper():
    from conftest import file_context

    from dpcheck.analysis.scripts import wrapped_attributes

    ctx = file_context("""
        import torch
        import torch.nn as nn
        from solvers import get_trainer

        trainer = get_trainer()
        if torch.cuda.device_count() > 1:
            trainer.generator = torch.nn.DataParallel(trainer.generator)
        trainer.critic = nn.DataParallel(trainer.critic).cuda()
        trainer.name = "gan"
        trainer.encoder = trainer.encoder.cuda()

        class Runner:
            def setup(self):
                self.model = nn.DataParallel(self.model)
    """, module="train")
    assert wrapped_attributes(ctx) == ["critic", "generator"]


def test_parallel_helpers_pass_two_parameters_on_to_the_functional_data_parallel():
    from conftest import file_context

    from dpcheck.analysis.functional import parallel_helpers

    ctx = file_context("""
        import torch
        import torch.nn as nn
        from torch.nn.parallel import data_parallel

        def data_parallel_helper(model, input, ngpu):
            if isinstance(input.data, torch.cuda.FloatTensor) and ngpu > 1:
                return nn.parallel.data_parallel(model, input, range(ngpu))
            return model(input)

        def run(ngpu, inputs, module):
            return data_parallel(module=module, inputs=inputs, device_ids=list(range(ngpu)))

        def run_fixed(model, input):
            return data_parallel(model, input.cuda(), [0, 1])  # (not a parameter as it is)

        def on_one_device(model, input, ngpu):
            return model(input)
    """, module="models.utils")
    assert parallel_helpers(ctx) == {"data_parallel_helper": ["0", "1"], "run": ["2", "1"]}


def test_pairing_helpers_pair_samples_of_a_parameter_by_strided_batch_slices():
    from conftest import file_context

    from dpcheck.analysis.pairing import pairing_helpers

    ctx = file_context("""
        import torch

        def do_mixup(x, mixup_lambda):
            return (x[0::2].transpose(0, -1) * mixup_lambda[0::2]
                    + x[1::2].transpose(0, -1) * mixup_lambda[1::2]).transpose(0, -1)

        def pair_gap(scale, h):
            return scale * (h[::2] - h[1::2])

        def rotate_half(x):
            return torch.cat((-x[..., 1::2], x[..., 0::2]), dim=-1)

        def haar(x):
            return x[:, 0::2] + x[:, 1::2]

        def subsample(x):
            return x[::2] * 2

        def rebound(x):
            x = x.flip(0)
            return x[0::2] - x[1::2]
    """, module="pytorch_utils")
    assert pairing_helpers(ctx) == {"do_mixup": ["0", "1"], "pair_gap": ["1"]}
    assert pairing_helpers(file_context("def f(x):\n    return x[0:None:2] + x[1:None:2]\n")) == {}


def test_item_stores_record_what_a_subclass_of_another_file_puts_into_a_container_on_self():
    # digideep: `PolicyBase.model_to_gpu` (another file) wraps every item of `self.model`; the
    # subclass's stores are what it wraps (issue 11).
    from conftest import file_context

    from dpcheck.analysis.wrapping import UNTRACED_ITEM, item_stores

    ctx = file_context("""
        import torch.nn as nn
        from pkg.base import PolicyBase
        from pkg.heads import Categorical

        class Policy(PolicyBase):
            def __init__(self, device, build):
                super().__init__(device)
                self.model["dist"] = Categorical(4, 2)
                self.model["base"] = build()
                self.model["dist"] = nn.DataParallel(self.model["dist"])
                self.extra.append(Categorical(4, 2).cuda())
                self.table = {}

        class Plain(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleDict()
                self.layers["a"] = Categorical(4, 2)
    """, module="pkg.policy")
    assert item_stores(ctx) == {"extra@pkg.policy.Policy": ["pkg.heads.Categorical"],
                                "model@pkg.policy.Policy": [UNTRACED_ITEM, "pkg.heads.Categorical"]}
    assert item_stores(file_context("class A(Base):\n    def f(self):\n        self.x = 1\n")) == {}


def test_a_private_class_built_in_a_module_is_a_layer_of_it():
    # faster-rcnn's `self.RCNN_rpn = _RPN(...)`: its 0-dim losses reach the gather through the
    # owner's forward, so the index must not take `_RPN` for a model of its own.
    from conftest import file_context

    from dpcheck.analysis.wrapping import layer_owners

    ctx = file_context("""
        import torch.nn as nn
        from model.rpn.rpn import _RPN

        class _fasterRCNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.RCNN_rpn = _RPN(512)
                self.helper = _make_helper()
    """, module="model.faster_rcnn")
    owners = layer_owners(ctx)
    assert owners["model.rpn.rpn._RPN"] == frozenset({"_fasterRCNN"})
    assert not any(part.endswith("_make_helper") for part in owners)


def _bare(source, module="pkg.train"):
    from conftest import file_context

    from dpcheck.analysis.bare_calls import summarize_bare_calls
    from dpcheck.analysis.file import FileResult

    ctx = file_context(source, module=module)
    result = FileResult("train.py", module)
    summarize_bare_calls(ctx, result)
    return result


def test_bare_built_classes_are_called_moved_or_read_through_and_nothing_else():
    result = _bare("""
        import torch.nn as nn
        import objective
        from losses import RingLoss, PassedLoss, ReturnedLoss, StoredLoss, LayerLoss, GlobalLoss
        from losses import Tested

        class Trainer:
            def __init__(self, args):
                self.criterion = objective.AttrLoss(args.t).cuda()
                self.criterion = self.criterion.to(args.device)

            def step(self, x):
                if self.criterion is None or isinstance(self.criterion, Tested):
                    return None
                self.criterion.t = 0.5
                return self.criterion(x)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.loss = LayerLoss()

        def main(model, x):
            crit = RingLoss()
            crit.cuda()
            crit = crit.to(x.device)
            passed = PassedLoss()
            run(model, passed)
            returned = ReturnedLoss()
            stored = StoredLoss()
            model.loss = stored
            out = crit(model(x)) + passed(x)
            return returned

        def other():
            global shared
            shared = GlobalLoss()
    """)
    # The local only called and moved (in place or into itself), the trainer's attribute (which
    # other files' reads decide), the local `main` returns (which the calls of `main` decide): built
    # bare. A layer of a module is layer_owners' (neither list).
    assert result.bare_built == ["AttrLoss:criterion:pkg.train.Trainer", "ReturnedLoss:()main", "RingLoss"]
    # Handed to a call, stored into the model, a global another function may read.
    assert {"PassedLoss", "StoredLoss", "GlobalLoss"} <= set(result.escaping)
    assert "RingLoss" not in result.escaping and "LayerLoss" not in result.escaping
    assert "Tested" not in result.escaping  # a type test builds nothing


def test_what_a_function_returns_is_bound_where_its_callers_bind_it():
    from conftest import file_context

    from dpcheck.analysis.bare_calls import result_bindings

    source = """
        import torch.nn as nn
        from losses import SRLoss, KDLoss, HintLoss, build_hint

        def build_loss():
            return SRLoss().cuda()

        def build_other():
            loss = HintLoss()
            keep(loss)
            return loss

        class Trainer:
            def __init__(self, model):
                self.model = nn.DataParallel(model)
                self.criterion = build_loss()
                self.kd = self._make_kd().cuda()
                self.hint = build_hint()

            def _make_kd(self):
                crit = KDLoss()
                return crit

        def main(model):
            hint = build_hint()
            model(hint)
    """
    result = _bare(source)
    # Returned as built (after moves), or through a local read only to be returned: the function
    # decides; handed on before it is returned: escaping.
    assert result.bare_built == ["KDLoss:()_make_kd", "SRLoss:()build_loss"]
    assert "HintLoss" in result.escaping
    # Every call of `build_loss` and `_make_kd` here keeps what it returns on the trainer; one call
    # of `build_hint` hands it to the model, so `build_hint` has no entry (the index reads that as
    # called otherwise).
    assert result_bindings(file_context(source, module="pkg.train")) == [
        "_make_kd=kd:pkg.train.Trainer", "build_loss=criterion:pkg.train.Trainer"]


def test_a_bare_attribute_is_not_kept_by_a_class_that_hands_on_self():
    result = _bare("""
        import torch.nn as nn
        from losses import Loss

        class Trainer:
            def __init__(self):
                self.criterion = Loss()
                self.model = nn.DataParallel(Wrapper(self))
    """)
    assert result.bare_built == [] and result.escaping == ["Loss"]


def test_passed_attributes_are_reads_other_than_calls_moves_and_reads_through():
    result = _bare("""
        import torch

        def fit(trainer, x):
            trainer.criterion(x)
            trainer.criterion.t = 1
            trainer.scale = trainer.scale.cuda()
            train(trainer.handed)
            kept = trainer.copied
            return torch.float32
    """)
    assert result.passed_attributes == ["copied", "handed"]


def test_a_bare_loss_is_advice_only_unless_the_project_hands_it_on():
    from conftest import FIXTURES, run_json

    def severities(folder):
        findings, _ = run_json(folder, "--select", "DP101,DP103")
        return {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["code"]): f["severity"] for f in findings}

    # What the project wraps is not traced (a ModuleList wrapped item by item), but the trainer's
    # criterion and the script's loss are only called on what the wrapped model returns: advice,
    # also for the memory bank only that loss builds, and for the regulariser called only through
    # the second name the script binds it to (`loss_fn = smoother`).
    assert severities(FIXTURES / "bare_called_loss") == {("losses.py", 16, "DP101"): "info",
                                                         ("losses.py", 26, "DP103"): "info",
                                                         ("losses.py", 52, "DP101"): "info"}
    # The same losses handed into the wrapped model and to a function (the regulariser through its
    # second name): their hazards stand.
    assert severities(FIXTURES / "bare_called_loss_handed_on") == {("losses.py", 15, "DP101"): "error",
                                                                   ("losses.py", 25, "DP103"): "warning",
                                                                   ("losses.py", 51, "DP101"): "error"}
    # The loss file checked alone shows no wrap and no construction: its findings stand.
    alone = severities(FIXTURES / "bare_called_loss" / "losses.py")
    assert alone == {("losses.py", 16, "DP101"): "error", ("losses.py", 26, "DP103"): "warning",
                     ("losses.py", 52, "DP101"): "error"}


def test_a_bare_loss_named_in_camel_case_or_beside_a_launcher_read_as_text():
    from conftest import FIXTURES, run_json

    def severities(folder):
        findings, _ = run_json(folder, "--select", "DP201")
        return {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]): f["severity"] for f in findings}

    # A loss class with a lower-case initial (`mIoULoss`) built and called only by the trainer is a
    # class all the same; built as a layer of the wrapped model too, it runs on every replica.
    assert severities(FIXTURES / "dp201" / "camellosspkg") == {("losses.py", 11): "info"}
    assert severities(FIXTURES / "dp201" / "camellosslayerpkg") == {("losses.py", 11): "error"}
    # A launcher read as text only: its `tester.eval()` looks no class up by name; Python's
    # `eval(...)` may build any class.
    assert severities(FIXTURES / "dp201" / "textscriptpkg") == {("features.py", 12): "info"}
    assert severities(FIXTURES / "dp201" / "textscriptevalpkg") == {("features.py", 11): "error"}


def _found(folder, code):
    from conftest import run_json

    findings, _ = run_json(folder, "--select", code)
    return sorted((f["filename"].rsplit("/", 1)[-1], f["location"]["row"]) for f in findings)


def test_batches_fed_by_the_callers_loaders_that_drop_the_last_batch():
    from conftest import FIXTURES

    # DP505: a method whose only callers feed it batches of a loader with drop_last=True (in a loop
    # around the call, also through a method that calls it in its body, or handed as the loader
    # it loops over) never sees a batch smaller than the GPU count; one caller on a loader that keeps
    # the partial last batch keeps the findings.
    assert _found(FIXTURES / "dp505" / "trainsteppkg", "DP505") == []
    assert _found(FIXTURES / "dp505" / "trainsteppartialpkg", "DP505") == [("flagged_model.py", 25),
                                                                            ("flagged_model.py", 29)]
    assert _found(FIXTURES / "dp505" / "loaderparampkg", "DP505") == []
    assert _found(FIXTURES / "dp505" / "loaderparampartialpkg", "DP505") == [("flagged_model.py", 25)]


def test_checkpoints_of_a_class_another_file_loads_with_the_prefix_stripped():
    from conftest import FIXTURES

    # DP702: another file of the package loads the class's checkpoints with the prefix taken off
    # (or retries so after a load as it is fails); a class it never loads so stays reported.
    assert _found(FIXTURES / "dp702" / "stripevalpkg", "DP702") == []
    assert _found(FIXTURES / "dp702" / "retrypkg", "DP702") == []
    assert _found(FIXTURES / "dp702" / "stripotherpkg", "DP702") == [("flagged_train.py", 24)]


def test_a_read_in_a_method_no_scanned_file_calls_is_advice():
    from conftest import FIXTURES, run_json

    def severities(*paths):
        findings, _ = run_json(*paths, "--select", "DP701")
        return {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]): f["severity"] for f in findings}

    # DP701: the trainer's `infer_on_batch` (and `_decode_all`, which only it calls) is called by no
    # scanned file, while train.py drives the trainer: advice only. What the training loop reaches
    # (`__call__` -> `get_loss`, and `sample`) stays an error, and so does a read in a method that a
    # base of an unscanned library calls by name (unittest's `test_*`).
    folder = FIXTURES / "dp701" / "inferpkg"
    assert severities(folder) == {("flagged_wrapper.py", 26): "error", ("flagged_wrapper.py", 30): "error",
                                  ("flagged_wrapper.py", 34): "info", ("flagged_wrapper.py", 38): "info",
                                  ("flagged_wrapper.py", 46): "error"}
    # Checked alone, the file shows none of its callers: every read stands.
    assert set(severities(folder / "flagged_wrapper.py").values()) == {"error"}
    # An evaluation script that builds the trainer (wrapping its codec) and calls the method: an error.
    assert severities(FIXTURES / "dp701" / "infercalledpkg") == {("flagged_wrapper.py", 30): "error"}
    # A wrapper another file hands a class's `__init__`, kept in `self.model`: read in `step` (the script
    # calls it) an error, in `ratings_report` (no scanned file calls it) advice.
    handed = severities(FIXTURES / "dp701" / "handedpkg")
    assert handed[("flagged_losses.py", 15)] == "error" and handed[("flagged_losses.py", 22)] == "info"
def test_a_file_trains_where_a_loop_runs_a_backward_pass_and_it_steps():
    from conftest import file_context

    from dpcheck.analysis.training import trains_models

    def trains(text):
        return trains_models(file_context(text))

    assert trains("""
        for x, y in loader:
            loss = model(x, y)
            loss.backward()
            optimizer.step()
    """)
    # Through a method of the file that a loop calls, and the step in another method.
    assert trains("""
        class Trainer:
            def step_once(self, x):
                self.scaler.scale(self.model(x)).backward()
            def fit(self, loader):
                for x in loader:
                    self.step_once(x)
                self.scaler.step(self.optimizer)
    """)
    # A loss scaler: the backward pass runs in no loop; a loop in a docstring is text.
    assert not trains('''
        class Scaler:
            """for x in loader: loss.backward()"""
            def __call__(self, loss, optimizer):
                loss.backward()
                optimizer.step()
    ''')
    # A backward pass in a loop with no optimizer or scheduler step anywhere (a gradient probe).
    assert not trains("""
        for x in inputs:
            model(x).sum().backward()
    """)


def test_an_application_that_trains_and_never_wraps_gets_advice_only():
    from conftest import FIXTURES, run_json

    def severities(*paths):
        findings, _ = run_json(*paths, "--select", "DP101,DP401")
        return {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"], f["code"]): (
            f["severity"], "an application that does not use DataParallel" in f["message"]) for f in findings}

    folder = FIXTURES / "application"
    models = folder / "models.py"
    errors = {("models.py", 19, "DP101"): ("error", False), ("models.py", 20, "DP401"): ("error", False)}
    # The model package alone, or with a helper that trains nothing itself: a library, whose users
    # may wrap any of its models.
    assert severities(models) == errors
    assert severities(models, folder / "scaler.py") == errors
    # With a training script that trains the model (DistributedDataParallel across processes) and
    # wraps nothing in DataParallel: an application that does not use it, advice only.
    assert severities(models, folder / "train.py", folder / "scaler.py") == {
        ("models.py", 19, "DP101"): ("info", True), ("models.py", 20, "DP401"): ("info", True)}
    # A helper that replicates the model by hand (replicate, scatter, parallel_apply, gather): the errors stand.
    assert severities(models, folder / "train.py", folder / "replicate_step.py") == errors
    # A script that hands the model to transformers' Trainer, which may wrap it itself: the errors stand.
    assert severities(models, folder / "train.py", folder / "train_hf.py") == errors
    # A script that wraps the model in DataParallel as well: the errors stand.
    assert severities(folder) == errors


def test_a_torch_class_read_off_torch_does_not_name_the_projects_class_of_that_name():
    """`nn.RNN` in a model names torch's RNN: a project class `RNN` (speechbrain's, vendored, built
    only in its docstring) that no file builds stays unbuilt; `blocks.RNN`, read off the project's
    module, names the project's class."""
    from dpcheck.analysis.file import analyze_source
    from dpcheck.analysis.index import ClassIndex
    from dpcheck.registry import rules_by_code

    rules = [rule() for rule in rules_by_code().values() if rule.kind == "static"]
    blocks = analyze_source(textwrap.dedent('''
        import torch

        class RNN(torch.nn.Module):
            """>>> net = RNN(hidden_size=5)"""
            def __init__(self, hidden_size):
                super().__init__()
                self.rnn = torch.nn.RNN(8, hidden_size)

            def forward(self, x, hx=None):
                return self.rnn(x, hx)
    '''), "pkg/blocks.py", rules, "pkg.blocks")

    def index_with(model_source):
        model = analyze_source(textwrap.dedent(model_source), "pkg/model.py", rules, "pkg.model")
        train = analyze_source("import torch\nfrom pkg.model import Net\n\nmodel = torch.nn.DataParallel(Net())\n",
                               "train.py", rules, "train")
        return ClassIndex([blocks, model, train])

    torch_rnn = '''
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.RNN(8, 8)
                self.cell = nn.modules.rnn.RNNCell(8, 8)
    '''
    assert index_with(torch_rnn).unbuilt("pkg/blocks.py", "RNN")
    project_rnn = '''
        import torch.nn as nn
        from pkg import blocks

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = blocks.RNN(8)
    '''
    assert index_with(project_rnn).unbuilt("pkg/blocks.py", "RNN") is None


def test_a_module_loaded_by_a_computed_name_under_a_written_package_is_any_module_of_that_package():
    from dpcheck.analysis.file import analyze_source
    from dpcheck.analysis.reach import SUBMODULES

    def loads(call, head="import importlib\nimport torch\n"):
        result = analyze_source(f"{head}name = 'x'\nm = {call}\n", "pkg/reg.py", [], "pkg.reg")
        return result.loads_by_name, [i for i in result.imports if i.endswith(SUBMODULES)]

    for call in ("importlib.import_module(f'basicsr.archs.{name}')", "__import__('config.' + name)",
                 "importlib.import_module('models.{}_arch'.format(name))", "importlib.import_module('models.%s' % name)"):
        loaded = call.split("'")[1].rpartition(".")[0]
        assert loads(call) == (False, [loaded + SUBMODULES]), call
    # (A registry's `__init__.py` that names no torch: the walk tells, not its words.)
    assert loads("importlib.import_module(f'basicsr.archs.{name}')", "import importlib\n") == (
        False, ["basicsr.archs" + SUBMODULES])
    # Any module at all: a name, a relative one, a prefix computed too.
    for call in ("importlib.import_module(name)", "importlib.import_module('.' + name, 'pkg')",
                 "importlib.import_module(name + '.models')", "importlib.import_module(f'{name}.models')"):
        assert loads(call) == (True, []), call


def test_a_class_wrapped_only_behind_a_switch_off_by_default_is_latent():
    """What only wraps behind a switch off by default run under DataParallel (the wrap itself in the
    arm of an `if` on the switch, or the construction of what it wraps) is latent: its errors are
    warnings that name the switch. What a wrap that runs by default also reaches stays an error."""
    from conftest import FIXTURES, run_json

    def severities(folder):
        findings, _ = run_json(folder, "--select", "DP101")
        return {(f["filename"].rsplit("/", 1)[-1], f["location"]["row"]): (f["severity"], f["message"])
                for f in findings}

    # `--baseline` (store_true) builds BaselineNet: latent. `--data_parallel` (default 0) around the wrap
    # of Refiner is the switch that turns DataParallel on: no option. MainNet is built by default and
    # wrapped; Shared is a layer of both nets.
    found = severities(FIXTURES / "latent_wrap")
    # GpuNet is built (then wrapped) behind `--cuda`, which every move to the GPU of gpu.py runs behind,
    # and Tagger behind `--do_train`, which tag.py stops without (with `--do_eval`): DataParallel runs
    # only with them set, so they are no options and the errors stand.
    assert {k: v[0] for k, v in found.items()} == {("models.py", 11): "error", ("models.py", 24): "warning",
                                                   ("models.py", 37): "error", ("models.py", 51): "error",
                                                   ("models.py", 65): "error", ("models.py", 78): "error"}
    assert "`baseline` changed from its default" in found[("models.py", 24)][1]
    # The same code with both switches on by default: BaselineNet is built by default, and MainNet,
    # built in the `else:` of `--baseline`, is the latent one.
    found = severities(FIXTURES / "latent_wrap_live")
    assert {k: v[0] for k, v in found.items()} == {("models.py", 11): "error", ("models.py", 24): "error",
                                                   ("models.py", 37): "warning", ("models.py", 50): "error"}
    # The model file checked alone shows no wrap: every finding stands.
    alone = severities(FIXTURES / "latent_wrap" / "models.py")
    assert {v[0] for v in alone.values()} == {"error"}


def test_the_latent_wrap_summary_survives_the_cache():
    """A file's latent wraps (wrapping.latent_wraps) come back from its cached summary as they were, with
    every other field in its place."""
    from conftest import FIXTURES

    from dpcheck.analysis.file import FileResult, analyze_source

    path = FIXTURES / "latent_wrap" / "train.py"
    result = analyze_source(path.read_text(encoding="utf-8"), str(path), [], "train")
    assert result.latent_wraps == {"models.BaselineNet": ["baseline"]}
    assert FileResult.from_dict(result.to_dict()) == result
