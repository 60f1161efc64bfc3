"""Python's cyclic garbage collector paused across a burst of short-lived allocations."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside; reference counting still frees what dies.

    A poll of a thousand jobs holds a few hundred thousand small containers (points,
    parser state, deltas) until its end, so the collector kept promoting them and ran
    full collections over every object of the process: about four a poll, 0.5 s of a
    3 s poll (bench/ingest.py). Afterwards it runs as usual, on what is left.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
