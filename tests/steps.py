"""Counting work instead of timing it: the lines of one source file executed during a call.

Tests check that a cost grows with the input's size, not faster, without a timed assertion
(bench/ measures times): the same call at two sizes, the ratio of the lines it ran."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def lines_run(source_file: str, call: Callable[[], Any]) -> int:
    """Lines of ``source_file`` executed while ``call()`` runs (other files' lines not counted:
    the parser's own work does not hide or inflate the code under test)."""
    steps = 0

    def trace(frame, event, _arg):
        nonlocal steps
        if frame.f_code.co_filename != source_file:
            return None
        if event == "line":
            steps += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(previous)
    return steps
