"""Routing LLM calls over actors: least loaded, or to the actor holding the call's prompt prefix."""

from __future__ import annotations

import pickle
from contextlib import ExitStack

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
