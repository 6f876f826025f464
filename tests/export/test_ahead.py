"""The export's read-ahead thread (openkb/exporting/ahead.py): order, errors, and no read after
the stream ends (the session is committed or closed then)."""

from __future__ import annotations

import threading

import pytest

from openkb.exporting.ahead import ahead


def test_items_come_in_order_and_all_of_them():
    assert list(ahead(iter(range(50)), 2, "t")) == list(range(50))
    assert list(ahead([], 2, "t")) == []


def test_an_error_of_the_source_is_raised_in_the_callers_thread_after_the_items_before_it():
    def source():
        yield 1
        yield 2
        raise ValueError("broken read")

    got = []
    with pytest.raises(ValueError, match="broken read"):
        for x in ahead(source(), 2, "t"):
            got.append(x)
    assert got == [1, 2]


def test_closing_early_stops_the_reader_before_its_next_item():
    produced = []
    reader_threads = set()

    def source():
        for i in range(1000):
            reader_threads.add(threading.current_thread().name)
            produced.append(i)
            yield i

    it = ahead(source(), 2, "export-test-reader")
    assert next(it) == 0
    it.close()  # a client went away: the generator is closed
    n = len(produced)
    assert n <= 4  # the one handed out, two queued, at most one more being put when it stopped
    assert not any(t.name == "export-test-reader" for t in threading.enumerate())  # joined
    assert len(produced) == n  # nothing read after close returned
    assert reader_threads == {"export-test-reader"}  # the reads ran in the reader thread
