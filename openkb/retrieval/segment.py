"""Chinese word segmentation for highlights: one jieba dictionary per process, loaded quietly and
ahead of the first query (docs/retrieval.md#grouped-results).

Why a module of its own: jieba loads its 350,000-word dictionary on first use, which took 1.6 s
(2.5 s without its cache) inside the first Chinese search after every start of the API, and it
announced that on stderr ("Building prefix dict ...", four lines, twice in the API's log once
our handler had them too, and in the middle of ``openkb search``'s table). Here the dictionary
is loaded by ``warm()`` while the API warms its index, jieba's logger only reports problems, and
its cache file lives under ``$OPENKB_HOME/cache`` instead of a shared ``/tmp/jieba.cache`` that
the first user to write it owns.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from openkb.runtime.home import cache_dir

_lock = threading.Lock()
_tokenizer: Any = None


def tokenizer() -> Any:
    """The process's jieba tokenizer, its dictionary loaded (once; threads wait for the first)."""
    global _tokenizer
    if _tokenizer is None:
        with _lock:
            if _tokenizer is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                tok = jieba.Tokenizer()
                where = cache_dir()
                if where is not None:
                    tok.tmp_dir = str(where)
                tok.initialize()
                _tokenizer = tok
    return _tokenizer


def cut(text: str) -> list[str]:
    """Words of a run of CJK text, as the index's jieba analyzer would cut it."""
    return list(tokenizer().lcut(text))


def warm() -> float:
    """Load the dictionary now (seconds it took; 0.0 if it was loaded already)."""
    t = time.perf_counter()
    loaded = _tokenizer is not None
    tokenizer()
    return 0.0 if loaded else time.perf_counter() - t
