"""The web process's heap after start-up: modules, models' metadata, URL patterns and settings live as long as
the process, yet every full garbage collection walks them again. Frozen (`gc.freeze`), they leave the
collector's generations, and a full collection walks only what requests left behind: measured in a process
that had served 300 search requests (Django's test client, DEBUG off), ~80-95 ms with ~165 k tracked objects,
~20 ms frozen; a pause every thread of the worker waits out. Called by `wsgi.py` once the application is
loaded, and by `bench_pages`, which times requests as the web process serves them.

History walks collect less often while they run (`fewer_collections`)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_loaded_objects() -> None:
    """Collect once (nothing garbage gets frozen), then move every surviving object to the permanent generation."""
    gc.collect()
    gc.freeze()


# Allocations between two young-generation collections while a walk runs (Python's default: 700).
WALK_GEN0_THRESHOLD = 50_000
_walks = 0
_saved: tuple[int, int, int] | None = None
_lock = threading.Lock()


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Young-generation collections 70× rarer while a history walk runs. Decoding one page of the upstream's
    JSON allocates ~10⁵ objects per hundred records, every one alive until the page is stored, so each collection
    during it walks them all and frees nothing: with the default threshold the decoding of a thousand-record page
    took ~3× its time without collections (`bench_ingest`). Nested and concurrent walks share the setting; the
    last to end puts back the one found."""
    global _walks, _saved
    with _lock:
        if _walks == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(WALK_GEN0_THRESHOLD, _saved[1], _saved[2])
        _walks += 1
    try:
        yield
    finally:
        with _lock:
            _walks -= 1
            if _walks == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
