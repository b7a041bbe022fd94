"""The reaching-binding fact (dpcheck/analysis/bindings.py): which binding of a name holds where a
call `read(name)` reads it, in statement order through branches, loops, rebindings and nested
scopes, for a file's context and for one function's index."""

import ast

import pytest
from conftest import file_context

from dpcheck.analysis.bindings import reaching_assignment, reaching_binding


def _read(ctx, marker="read"):
    """The name argument of the one `read(...)` call (or ``marker``) of the file."""
    calls = [c for c in ctx.nodes(ast.Call) if isinstance(c.func, ast.Name) and c.func.id == marker]
    assert len(calls) == 1
    return calls[0].args[0]


def _line(code, name="x", **options):
    """The line of the binding that reaches `read(name)` in the file, or None."""
    ctx = file_context(code)
    found = reaching_binding(ctx, name, _read(ctx), **options)
    return None if found is None else found.lineno


def _function_line(code, name="x"):
    """The same asked of the index of the function `f` alone (how model-class rules ask)."""
    ctx = file_context(code)
    node = next(n for n in ctx.nodes(ast.FunctionDef) if n.name == "f")
    found = reaching_binding(ctx.function(node, None), name, _read(ctx))
    return None if found is None else found.lineno


def test_straight_line_takes_the_last_assignment_before_the_read():
    code = """
    x = 1
    x = 2
    read(x)
    x = 3
    """
    assert _line(code) == 3


def test_assignment_in_one_arm_does_not_decide_after_the_if():
    assert _line("""
    x = 1
    if c:
        x = 2
    read(x)
    """) is None
    # Inside the arm, its own assignment reaches; the other arm's never does.
    assert _line("""
    x = 1
    if c:
        x = 2
        read(x)
    """) == 4
    assert _line("""
    x = 1
    if c:
        x = 2
    else:
        read(x)
    """) == 2


def test_both_arms_of_a_try_and_the_except_clause():
    assert _line("""
    x = 1
    try:
        x = 2
    except ValueError:
        read(x)
    """) is None  # the try's assignment may or may not have run
    assert _line("""
    x = 1
    try:
        y = 2
    except ValueError:
        read(x)
    """) == 2
    assert _line("""
    try:
        x = 2
    except ValueError:
        pass
    else:
        read(x)
    """) == 3


def test_later_assignment_in_a_loop_reaches_the_next_iteration():
    assert _line("""
    x = 1
    for i in range(3):
        read(x)
        x = 2
    """) is None
    assert _line("""
    x = 1
    for i in range(3):
        x = f(i)
        read(x)
    """) == 4  # rebound first in every iteration
    assert _line("""
    x = 1
    while cond:
        read(x)
    """) == 2  # a loop that does not bind it passes the earlier value through
    assert _line("""
    x = 1
    while read(x):
        x = x - 1
    """) is None  # the test runs again after the body


def test_loop_target_is_the_binding_in_the_loop_body():
    ctx = file_context("""
    for i, x in enumerate(loader):
        read(x)
    """)
    found = reaching_binding(ctx, "x", _read(ctx))
    assert isinstance(found, ast.For)
    assert reaching_assignment(ctx, "x", _read(ctx)) is None  # not a plain assignment
    assert _line("""
    for x in loader:
        x = x.cuda()
        read(x)
    """) == 3


@pytest.mark.parametrize("binding", ["x += 1", "x, y = pair", "with f() as x: pass", "import x",
                                     "def x(): pass", "del x", "for x in y: pass", "(x := 5)"])
def test_a_binding_that_is_not_a_plain_assignment_hides_the_value(binding):
    assert _line(f"""
    x = 1
    {binding}
    read(x)
    """) is None


def test_chained_and_annotated_assignments_are_plain():
    assert _line("a = x = 3\nread(x)") == 1
    ctx = file_context("x: int = 3\nread(x)")
    assert isinstance(reaching_assignment(ctx, "x", _read(ctx)), ast.AnnAssign)


def test_parameters_and_their_rebinding():
    assert _line("""
    def f(x):
        read(x)
    """) is None
    assert _line("""
    def f(x):
        x = 2
        read(x)
    """) == 3


def test_nested_functions_bind_their_own_names():
    code = """
    def f():
        x = 1
        def g():
            x = 2
            return x
        read(x)
    """
    assert _line(code) == 3
    assert _function_line(code) == 3  # asked of the function's own index


def test_module_value_of_a_name_the_function_never_binds():
    code = """
    x = 1
    def f():
        read(x)
    """
    assert _line(code, module_fallback=True) == 2
    assert _line(code) is None  # not asked for
    # Bound twice in the module: which one a call of f sees depends on when it runs.
    assert _line("x = 1\nx = 2\ndef f():\n    read(x)\n", module_fallback=True) is None
    # A function around the reading one binds it: a closure, not the module's value.
    assert _line("""
    x = 1
    def f():
        x = 2
        def g():
            read(x)
    """, module_fallback=True) is None
    # Bound in the function after the read: a local name, unbound here (not the module's).
    assert _line("""
    x = 1
    def f():
        read(x)
        x = 2
    """, module_fallback=True) is None
    assert _line("""
    x = 1
    def f():
        global x
        read(x)
    """, module_fallback=True) is None


def test_comprehension_variable_and_outer_name():
    assert _line("x = 1\n[read(x) for x in items]") is None
    assert _line("x = 1\n[read(x) for i in items]") == 1


def test_function_index_matches_the_file_context():
    code = """
    def f(a):
        x = a
        for i in range(3):
            if i:
                x = i
            read(x)
    """
    assert _line(code) is None
    assert _function_line(code) is None
    code = code.replace("            read(x)", "            read(x)\n        x = a")
    assert _function_line(code) is None
    assert _function_line("""
    def f(a):
        try:
            y = a
        except ValueError:
            x = 2
            read(x)
    """) == 6


def test_a_name_another_function_rebinds_through_a_declaration_is_not_known():
    # `global x` in another function: calling it rebinds the module's x, wherever it was called.
    rebinding = "x = 1\ndef reset():\n    global x\n    x = 2\n"
    assert _line(rebinding + "def f():\n    read(x)\n", module_fallback=True) is None
    assert _line(rebinding + "reset()\nread(x)\n") is None
    # `nonlocal x` in a nested function rebinds the outer function's x when it is called.
    assert _line("""
    def outer():
        x = 1
        def bump():
            nonlocal x
            x = 2
        bump()
        read(x)
    """) is None
    # A declaration of another name, or of a function's own local elsewhere, changes nothing.
    assert _line("x = 1\ndef g():\n    global y\n    y = 2\ndef f():\n    read(x)\n", module_fallback=True) == 1
    assert _line("""
    def outer():
        x = 1
        read(x)
    def other():
        x = 0
        def bump():
            nonlocal x
            x = 2
    """) == 3
