"""Routing LLM calls over actors: least loaded, or to the actor holding the call's prompt prefix."""

from __future__ import annotations

import pickle
from contextlib import ExitStack

import pytest

from kifqa.llm.routing import LeastLoaded


def test_calls_sharing_a_prefix_go_to_one_member_in_every_process():
    pool = LeastLoaded(["a", "b", "c"])
    homes = {}
    for key in (f"cluster-{i}" for i in range(12)):
        with pool.pick(key) as member:
            homes[key] = member
        with pool.pick(key) as again:
            assert again == member
        with pickle.loads(pickle.dumps(pool)).pick(key) as elsewhere:  # another task's copy
            assert elsewhere == member
    assert set(homes.values()) == {"a", "b", "c"}  # keys are spread over the members


def test_a_busy_home_spills_to_the_least_loaded_member():
    pool = LeastLoaded(["a", "b"], spill=2)
    with pool.pick("fixed") as home:
        other = "b" if home == "a" else "a"
    with ExitStack() as held:
        picks = [held.enter_context(pool.pick("fixed")) for _ in range(3)]
        assert picks == [home] * 3  # up to `spill` more in flight than the other member
        assert held.enter_context(pool.pick("fixed")) == other
    with pool.pick(None) as first, pool.pick(None) as second:  # no key: least loaded, as before
        assert {first, second} == {"a", "b"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_failing_member_is_not_chosen_though_it_looks_least_loaded():
    clock = Clock()
    pool = LeastLoaded(["a", "b"], clock=clock)
    with ExitStack() as held:
        busy = held.enter_context(pool.pick())  # "a" or "b" now has a call in flight
        idle = "b" if busy == "a" else "a"
        pool.failed(idle)  # the idle one fails fast: it has nothing in flight
        assert [held.enter_context(pool.pick()) for _ in range(3)] == [busy] * 3
        assert pool.avoided() == [idle]
    for key in (f"cluster-{i}" for i in range(6)):  # prefix homes too go around it
        with pool.pick(key) as member:
            assert member == busy


def test_a_failing_member_is_tried_again_after_a_growing_wait_and_is_healthy_once_it_succeeds():
    clock = Clock()
    pool = LeastLoaded(["a", "b"], clock=clock)
    pool.failed("a")
    clock.now += 1.1  # the first wait is 1 s
    assert pool.avoided() == []
    pool.failed("a")
    clock.now += 1.1  # the second is 2 s
    assert pool.avoided() == ["a"]
    clock.now += 1.0
    assert pool.avoided() == []
    pool.succeeded("a")
    pool.failed("a")
    clock.now += 1.1  # a success starts the count again
    assert pool.avoided() == []


def test_when_every_member_fails_the_one_whose_wait_ends_first_is_picked():
    clock = Clock()
    pool = LeastLoaded(["a", "b"], clock=clock)
    pool.failed("a")
    pool.failed("a")  # avoided 2 s
    pool.failed("b")  # avoided 1 s
    with pool.pick() as member:
        assert member == "b"


def test_a_removed_member_is_never_picked_and_none_left_is_an_error() -> None:
    pool = LeastLoaded(["a", "b"])
    pool.remove("a")
    for _ in range(4):
        with pool.pick() as member, pool.pick("some prefix") as keyed:
            assert member == keyed == "b"
    assert pool.live == ["b"]
    pool.remove("b")
    with pytest.raises(LookupError, match="every member"), pool.pick():
        pass
