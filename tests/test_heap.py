"""The collector's young-generation threshold while history walks run."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from dashboard.heap import WALK_GEN0_THRESHOLD, fewer_collections


@pytest.fixture
def threshold() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(613, 9, 11)
    yield gc.get_threshold()
    gc.set_threshold(*saved)


def test_a_walk_raises_the_young_threshold_and_puts_back_the_one_found(threshold: tuple[int, int, int]) -> None:
    with fewer_collections():
        assert gc.get_threshold() == (WALK_GEN0_THRESHOLD, 9, 11)
        with fewer_collections():  # a nested walk
            assert gc.get_threshold() == (WALK_GEN0_THRESHOLD, 9, 11)
        assert gc.get_threshold() == (WALK_GEN0_THRESHOLD, 9, 11)
    assert gc.get_threshold() == threshold


def test_an_error_in_a_walk_still_puts_the_threshold_back(threshold: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("the upstream went away")
    assert gc.get_threshold() == threshold


def test_concurrent_walks_keep_the_setting_until_the_last_ends(threshold: tuple[int, int, int]) -> None:
    first_in, second_out, seen = threading.Event(), threading.Event(), []

    def first() -> None:
        with fewer_collections():
            first_in.set()
            second_out.wait(5)
            seen.append(gc.get_threshold())  # the other walk ended; this one still runs

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(5)
    with fewer_collections():
        assert gc.get_threshold()[0] == WALK_GEN0_THRESHOLD
    second_out.set()
    thread.join(5)
    assert seen == [(WALK_GEN0_THRESHOLD, 9, 11)]
    assert gc.get_threshold() == threshold
