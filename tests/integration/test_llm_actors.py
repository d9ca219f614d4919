"""LLM actors on a three-node ``ray.cluster_utils.Cluster`` whose nodes declare GPUs (no GPU needed): a
dead vLLM engine restarts its actor and its questions are answered elsewhere, a failing actor is not
chosen, a tensor-parallel engine gets its GPUs on one node, and the API key reaches the actors without
the runtime env."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.placement_group import placement_group_table

from kifqa.batch.llmpool import ActorLLM, forwarded_secrets, start_llm_pool
from kifqa.config import Settings
from kifqa.llm import open_llm
from kifqa.llm.base import LLM, ChatRequest, Completion, Message, Usage
from tests.llm_server import ChatServer

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

FAKE_VLLM = Path(__file__).resolve().parents[1] / "fake_vllm"


@pytest.fixture(scope="module")
def die_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file whose removal kills a fake vLLM engine (the nodes' workers see its path)."""
    return tmp_path_factory.mktemp("die") / "die-now"


@pytest.fixture(scope="module")
def cluster(die_file: Path) -> Iterator[Cluster]:
    """A CPU head and two worker nodes declaring 1 and 2 GPUs; the nodes' processes import the fake vLLM."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "FAKE_VLLM_DIE_FILE", "OPENAI_API_KEY")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FAKE_VLLM), saved["PYTHONPATH"]]))
    os.environ["FAKE_VLLM_DIE_FILE"] = str(die_file)
    os.environ.pop("OPENAI_API_KEY", None)  # the nodes start without the key
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 0, "include_dashboard": False})
    cluster.add_node(num_cpus=1, num_gpus=1)
    cluster.add_node(num_cpus=1, num_gpus=2)
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def ask(text: str) -> ChatRequest:
    return ChatRequest(messages=(Message("user", text),), max_tokens=8)


def _pid(actor: ray.actor.ActorHandle) -> int:
    """The actor's process id, once it is up (Ray answers a call to a restarting actor with ActorUnavailableError)."""
    for _ in range(120):
        try:
            return ray.get(actor.__ray_call__.remote(lambda self: os.getpid()), timeout=120)
        except ray.exceptions.ActorUnavailableError:
            time.sleep(1)
    raise AssertionError("the actor did not come back in two minutes")


def vllm_settings(**batch: object) -> Settings:
    settings = Settings(llm={"backend": "vllm", "model": "some/model", "timeout_s": 30})
    return settings.model_copy(update={"batch": settings.batch.model_copy(update=batch)})


def test_a_dead_engine_restarts_its_actor_and_its_questions_are_answered(cluster: Cluster, die_file: Path) -> None:
    actors = start_llm_pool(vllm_settings(llm_actors=2, llm_actor_cpus=0.5), open_llm).actors
    try:
        ray.get([a.warm.remote() for a in actors], timeout=120)
        before = [_pid(a) for a in actors]
        llm = ActorLLM(actors, "vllm:some/model")
        die_file.touch()  # the next request that reaches an engine kills it
        done = llm.generate([ask(f"question {i}") for i in range(24)])
        assert not die_file.exists(), "an engine died"
        assert [c.text for c in done] == [f"echo: question {i}" for i in range(24)], [c.error for c in done if c.error]
        after = [_pid(a) for a in actors]  # waits for the restarted actor
        assert sum(b != a for b, a in zip(before, after)) == 1, "exactly the dead engine's actor was restarted"
        (answered,) = ray.get(actors[[b != a for b, a in zip(before, after)].index(True)].agenerate.remote(
            [ask("after the restart")]), timeout=120)
        assert answered.text == "echo: after the restart"
    finally:
        for actor in actors:
            ray.kill(actor)


class HalfBroken(LLM):
    """Answers after 20 ms; the instance that removes ``broken`` (one only) fails every request at once."""

    identity = "half-broken"

    def __init__(self, settings: Settings, *, broken: Path) -> None:
        try:
            broken.unlink()
            self.broken = True
        except FileNotFoundError:
            self.broken = False

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        if self.broken:
            return [Completion(error="backend down") for _ in requests]
        await asyncio.sleep(0.02)
        return [Completion(text="ok", usage=Usage(prompt_tokens=1)) for _ in requests]


def test_routing_stops_choosing_an_actor_that_fails_fast(cluster: Cluster, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.touch()
    actors = start_llm_pool(vllm_settings(llm_actors=2, llm_actor_cpus=0.5).model_copy(
        update={"llm": Settings().llm}), partial(HalfBroken, broken=broken)).actors
    try:
        ray.get([a.warm.remote() for a in actors], timeout=120)
        llm = ActorLLM(actors, "half-broken")

        async def waves() -> list[Completion]:
            done: list[Completion] = []
            for _ in range(10):  # 10 waves of 4 concurrent requests, about 20 ms apart
                done += await llm.agenerate([ask(f"q{i}") for i in range(4)])
            return done

        done = asyncio.run(waves())
    finally:
        for actor in actors:
            ray.kill(actor)
    failed = sum(not c.ok for c in done)
    assert 1 <= failed <= 4, f"{failed} of 40 requests went to the failing actor (least loaded alone: about 20)"


def test_a_tensor_parallel_engine_gets_one_placement_group_with_its_gpus_on_one_node(cluster: Cluster) -> None:
    settings = vllm_settings(llm_actors=1, llm_actor_cpus=0.5, llm_actor_gpus=1)
    settings = settings.model_copy(update={"llm": settings.llm.model_copy(update={"extra": {"tensor_parallel_size": 2}})})
    pool = start_llm_pool(settings, open_llm)
    [group], [actor] = pool.groups, pool.actors
    try:
        assert ray.get(group.ready(), timeout=60)
        table = placement_group_table(group)
        assert table["strategy"] == "STRICT_PACK"
        assert [b.get("GPU") for b in table["bundles"].values()] == [1.0, 1.0]
        nodes = set(table["bundles_to_node_id"].values())
        two_gpu_node = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU") == 2)
        assert nodes == {two_gpu_node}
        assert ray.get(actor.warm.remote(), timeout=120) == "vllm:some/model"
        engine_args = ray.get(actor.__ray_call__.remote(lambda self: vars(self._llm._engine.engine_args)))
        assert engine_args["tensor_parallel_size"] == 2 and engine_args["distributed_executor_backend"] == "ray"
        actor_node = ray.get(actor.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()))
        assert actor_node == two_gpu_node
    finally:
        ray.kill(actor)
        ray.util.remove_placement_group(group)


def test_the_api_key_reaches_the_actors_without_the_runtime_env(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-only-the-driver-has-it")  # set after the nodes started
    with ChatServer() as server:
        settings = Settings(llm={"backend": "openai", "base_url": server.url, "model": "m"})
        settings = settings.model_copy(update={"batch": settings.batch.model_copy(update={
            "llm_actors": 2, "llm_actor_cpus": 0, "llm_actor_gpus": 1})})  # on the GPU nodes, not the driver's
        assert list(forwarded_secrets(settings)) == ["OPENAI_API_KEY"]
        assert "sk-only" not in repr(forwarded_secrets(settings))
        actors = start_llm_pool(settings, open_llm).actors
        try:
            done = [ray.get(a.agenerate.remote([ask(f"from actor {i}")]), timeout=120)[0] for i, a in enumerate(actors)]
            runtime_envs = ray.get([a.__ray_call__.remote(lambda self: ray.get_runtime_context().runtime_env)
                                    for a in actors])
        finally:
            for actor in actors:
                ray.kill(actor)
    assert all(c.ok for c in done), [c.error for c in done]
    assert [h.get("authorization") for h in server.headers] == ["Bearer sk-only-the-driver-has-it"] * 2
    assert "sk-only" not in repr(runtime_envs)


def test_an_actor_past_its_restarts_leaves_the_routing(cluster: Cluster, die_file: Path) -> None:
    actors = start_llm_pool(vllm_settings(llm_actors=2, llm_actor_cpus=0.5, llm_actor_max_restarts=0),
                            open_llm).actors
    try:
        ray.get([a.warm.remote() for a in actors], timeout=120)
        llm = ActorLLM(actors, "vllm:some/model")
        die_file.touch()  # the next request that reaches an engine kills it, and Ray does not restart it
        done = llm.generate([ask(f"question {i}") for i in range(24)])
        assert not die_file.exists(), "an engine died"
        assert all(c.ok for c in done), [c.error for c in done if c.error]
        assert len(llm.live_actors) == 1, "the dead actor left the routing"
        (survivor,) = llm.live_actors
        assert ray.get(survivor.agenerate.remote([ask("still here")]), timeout=120)[0].text == "echo: still here"
        die_file.touch()  # now the last one dies too
        done = llm.generate([ask("one"), ask("two")])
        assert not llm.live_actors
        assert all(not c.ok and "every LLM actor died" in c.error and "llm_actor_max_restarts" in c.error
                   for c in done), [c.error for c in done]
    finally:
        for actor in actors:
            ray.kill(actor)
