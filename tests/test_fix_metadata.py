"""The fixers' positions and parents, resolved one top-level statement at a time, are the
ones libcst gives for the whole module: every node's position, parent and span lookup."""

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from dpcheck.fixes.cst import Metadata

ROOT = Path(__file__).resolve().parents[1]

SHAPES = {
    "decorated": '''# header comment

import torch  # trailing
import torch.nn as nn; import os


@torch.no_grad()
# between decorators
@staticmethod

def helper(x):
    return x.cuda(0)


class Net(nn.Module):
    def forward(self, x):
        if x is None:
            pass
        # footer of the block
    # dedented comment

async def run():
    pass
# footer comment
''',
    "no_final_newline": "import torch\nx = torch.zeros(3).cuda(0)",
    "crlf": "import torch\r\n\r\ndef f(x):\r\n    return x.cuda(0)\r\n",
    "form_feed": "import torch\n\x0c\ndef f(x):\n    return x.cuda(0)\n\x0cy = 1\n",
    "only_comments": "# nothing\n# else\n",
}


def _whole(module):
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    return wrapper.resolve(PositionProvider), wrapper.resolve(ParentNodeProvider)


def _in_statements(module, parents):
    """The nodes under a top-level statement (not the module's header or footer lines)."""
    def top(node):
        while node is not None and parents.get(node) is not module:
            node = parents.get(node)
        return node

    return [n for n in parents if isinstance(top(n), cst.BaseStatement)]


def _check(source: str) -> Metadata:
    module = cst.parse_module(source)
    positions, parents = _whole(module)
    by_span = {}
    for node, where in positions.items():
        by_span.setdefault((where.start.line, where.start.column, where.end.line, where.end.column), node)
    nodes = _in_statements(module, parents)
    metadata = Metadata(module, source)
    # Spans first (they resolve statements on demand), then every node's position and parent.
    for node in nodes:
        where = positions[node]
        span = (where.start.line, where.start.column, where.end.line, where.end.column)
        assert metadata.node_at(span) is by_span[span]
    for node in nodes:
        assert metadata.position(node) == positions[node]
        assert metadata.parent(node) is parents[node]
    return metadata


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_statement_metadata_is_the_whole_modules(name):
    _check(SHAPES[name])


def test_statements_resolve_alone_on_ordinary_files():
    """Files without libcst's round-trip quirks never need the whole module's metadata."""
    for source in (SHAPES["decorated"], SHAPES["no_final_newline"], SHAPES["crlf"],
                   min((ROOT / "fixtures" / "dp301").glob("flagged_*.py")).read_text()):
        metadata = _check(source)
        assert not metadata._whole
        assert len(metadata._resolved) == len(metadata.module.body)


@pytest.mark.parametrize("folder", ["fixtures", "tests/heldout"])
def test_statement_metadata_on_the_repositorys_models(folder):
    for path in sorted((ROOT / folder).rglob("*.py"))[::7]:
        source = path.read_text(encoding="utf-8")
        try:
            ast.parse(source)
        except SyntaxError:
            continue  # (the Python 2 fixtures of DP001's reading: no fix is offered in them)
        _check(source)


def test_replacing_rebuilds_only_touched_statements_with_the_same_code():
    source = SHAPES["decorated"]
    module = cst.parse_module(source)
    metadata = Metadata(module, source)
    positions, _ = _whole(module)
    calls = [n for n in positions if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
             and n.func.attr.value == "cuda"]
    target = metadata.node_at(next((w.start.line, w.start.column, w.end.line, w.end.column)
                                   for n, w in positions.items() if n is calls[0]))
    assert target is calls[0]
    replacements = {target: target.with_changes(args=())}
    assert metadata.replaced(replacements).code == module.visit(_replace(replacements)).code
    assert len(metadata._resolved) == 1
    line = next(s for s in module.body if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 2)
    metadata.position(line)
    removal = {line: cst.RemovalSentinel.REMOVE}
    assert metadata.replaced(removal).code == module.visit(_replace(removal)).code


def _replace(replacements):
    class Replace(cst.CSTTransformer):
        def on_leave(self, original_node, updated_node):
            return replacements.get(original_node, updated_node)

    return Replace()
