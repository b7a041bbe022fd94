"""
## Why is this bad?

dpcheck could not read or parse the file: a syntax error, bytes that are not valid in
the file's encoding (UTF-8 unless a BOM or a coding cookie says otherwise), a NUL
byte, or an expression nested too deeply for Python's parser. dpcheck checks nothing
else in the file until it parses; every other file is still checked.

The finding is placed at the line and column the parser reports.

Code that Python 3.6 reads but 3.7+ refuses (`x.cuda(async=True)`, PyTorch's name for
`non_blocking` before 0.4) is not reported: dpcheck analyses it under Python 3.6's grammar.

## How to fix

Fix the syntax error (run `python -m py_compile FILE` to see it as Python does), or
exclude the file (`extend-exclude`) if it is not Python source.
"""

from __future__ import annotations

from dpcheck.rule import Rule, Severity


class SyntaxErrorRule(Rule):
    code = "DP001"
    name = "syntax-error"
    severity = Severity.ERROR
    summary = "The file cannot be parsed (syntax error or undecodable bytes)"
    fix_hint = "Fix the syntax error; dpcheck checks nothing else in this file until then"
    kind = "engine"  # reported by the engine itself, never by a check
