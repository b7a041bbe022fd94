"""Static analysis: parse a file once, derive the facts rules share, run the rules (see file.py)."""
