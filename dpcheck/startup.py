"""The cyclic garbage collector during start-up: paused from the command line's first step
until the first file is analysed.

Start-up (imports of about 60 dpcheck modules and 50 rules, the configuration, argparse)
allocates tens of thousands of objects that live for the whole run and makes almost no
cyclic garbage (a few hundred objects), yet each allocation threshold crossed starts a
collection that walks them: about 20 collections, 7 to 13 ms of a one-file run whose own
analysis takes 6 ms. The pause ends before any file is analysed, and what start-up made is
frozen out of later collections (``gc.freeze``), which also leaves it untouched in forked
workers instead of copying their pages when a collection would write to them.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Stop the collector, unless it is off already (then ``resume`` leaves it off)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """End the pause that ``pause`` made, if any."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
