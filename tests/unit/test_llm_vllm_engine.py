"""The ``vllm`` backend against a stand-in ``vllm`` package (tests/fake_vllm) with vLLM's API."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kifqa.config import LLMSettings, Settings
from kifqa.errors import LLMError
from kifqa.llm import ChatRequest, Completion, Message, VllmLLM, open_llm
from kifqa.llm.vllm_engine import EngineDead

FAKE_VLLM = Path(__file__).resolve().parents[1] / "fake_vllm"
GRAMMAR = 'root ::= "(" [a-z ]+ " | " [a-z ]+ " | ?x)"'


def _forget_vllm() -> None:
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


@pytest.fixture()
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """The fake package on ``sys.path``; yields its engine class (which lists its instances)."""
    _forget_vllm()
    monkeypatch.syspath_prepend(str(FAKE_VLLM))
    from vllm import AsyncLLMEngine

    AsyncLLMEngine.instances.clear()
    yield AsyncLLMEngine
    _forget_vllm()


def ask(text: str, *, grammar: str | None = None, system: str = "Few-shot prefix shared by all.") -> ChatRequest:
    return ChatRequest(messages=(Message("system", system), Message("user", text)), grammar=grammar, max_tokens=12)


def test_generates_with_greedy_grammar_constrained_sampling(fake_vllm: type) -> None:
    llm = VllmLLM(model="qwen2.5-coder-1.5b", context=2048, engine_options={"gpu_memory_utilization": 0.5})
    try:
        constrained, free = llm.generate([ask("who directed alien", grammar=GRAMMAR), ask("hello there")])
    finally:
        asyncio.run(llm.aclose())
    assert constrained.ok and constrained.text == "(fake | grammar | ?x)"
    assert free.ok and free.text == "echo: hello there"
    (engine,) = fake_vllm.instances
    args = engine.engine_args
    assert (args.model, args.max_model_len, args.enable_prefix_caching, args.gpu_memory_utilization) == (
        "Qwen/Qwen2.5-Coder-1.5B-Instruct", 2048, True, 0.5)
    by_text = {prompt.split("user\n")[-1].split("<|im_end|>")[0]: params for prompt, params, _ in engine.requests}
    params = by_text["who directed alien"]
    assert params.temperature == 0.0 and params.max_tokens == 12 and params.output_kind.name == "FINAL_ONLY"
    assert params.structured_outputs.grammar == GRAMMAR
    assert by_text["hello there"].structured_outputs is None
    prompt = engine.requests[0][0]
    assert prompt.startswith("<|begin_of_text|><|im_start|>system\nFew-shot prefix")
    assert prompt.endswith("<|im_start|>assistant\n")
    assert engine.is_shut_down
    assert llm.identity == "vllm:Qwen/Qwen2.5-Coder-1.5B-Instruct"


def test_reports_tokens_and_prefix_cache_hits(fake_vllm: type) -> None:
    llm = VllmLLM(model="some/model")
    try:
        (first,) = llm.generate([ask("what is the capital of peru")])
        (second,) = llm.generate([ask("who wrote dracula")])  # a second call: a new caller loop
    finally:
        asyncio.run(llm.aclose())
    assert first.usage.cached_prompt_tokens == 0
    assert first.usage.prompt_tokens > second.usage.cached_prompt_tokens > 0
    assert second.usage.completion_tokens == len("echo: who wrote dracula".split())
    assert len(fake_vllm.instances) == 1  # one engine for both calls


def test_each_sampled_token_s_logprob_comes_back(fake_vllm: type) -> None:
    llm = VllmLLM(model="some/model")
    try:
        (done,) = llm.generate([ask("who wrote dracula")])
    finally:
        asyncio.run(llm.aclose())
    [engine] = fake_vllm.instances
    assert engine.requests[0][1].logprobs == 0  # the sampled token only, no alternatives
    assert done.logprobs == (-0.125, -0.25, -0.375, -0.5) and len(done.logprobs) == done.usage.completion_tokens


def test_concurrent_callers_are_batched_on_one_engine(fake_vllm: type) -> None:
    llm = VllmLLM(model="m")

    async def main() -> list[list[str]]:
        try:
            batches = await asyncio.gather(*(llm.agenerate([ask(f"q{b}-{i}") for i in range(4)]) for b in range(3)))
        finally:
            await llm.aclose()
        return [[c.text for c in batch] for batch in batches]

    assert asyncio.run(main()) == [[f"echo: q{b}-{i}" for i in range(4)] for b in range(3)]
    (engine,) = fake_vllm.instances
    assert engine.max_running == 12


def test_a_failing_or_late_request_is_an_error_for_that_request_only(fake_vllm: type) -> None:
    llm = VllmLLM(model="m", timeout_s=0.5)
    start = time.perf_counter()
    try:
        bad, late, good = llm.generate([ask("please RAISE"), ask("a SLOW one"), ask("fine")])
    finally:
        asyncio.run(llm.aclose())
    assert time.perf_counter() - start < 3.0
    assert not bad.ok and "ValueError: the fake engine was asked to fail" in bad.error
    assert not late.ok and "no answer within 0.5 s" in late.error
    assert good.ok and good.text == "echo: fine"


def test_open_llm_builds_the_vllm_backend(fake_vllm: type) -> None:
    llm = open_llm(Settings(llm=LLMSettings(backend="vllm", model="org/model", context=1024,
                                            extra={"enforce_eager": True})))
    try:
        (done,) = llm.generate([ask("q")])
    finally:
        asyncio.run(llm.aclose())
    assert done.ok and isinstance(llm, VllmLLM)
    assert fake_vllm.instances[0].engine_args.enforce_eager is True


def test_without_vllm_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget_vllm()
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    llm = VllmLLM(model="m")
    try:
        with pytest.raises(LLMError, match=r"pip install 'kifqa\[vllm\]'"):
            llm.generate([ask("q")])
    finally:
        asyncio.run(llm.aclose())


def test_a_prompt_carries_one_bos_token(fake_vllm: type) -> None:
    llm = VllmLLM(model="meta-llama/Llama-3.1-8B-Instruct")
    try:
        (done,) = llm.generate([ask("who wrote dracula")])
    finally:
        asyncio.run(llm.aclose())
    assert done.ok and done.text == "echo: who wrote dracula"
    (engine,) = fake_vllm.instances
    (ids,) = engine.prompt_ids
    bos = engine.tokenizer.bos_token_id
    # The chat template starts with BOS; vLLM tokenizing the rendered text would add a second one.
    assert engine.tokenizer.encode(engine.requests[0][0]).count(bos) == 2
    assert ids.count(bos) == 1 and ids[0] == bos
    assert done.usage.prompt_tokens == len(ids)


def test_a_dead_engine_raises_engine_dead_for_the_whole_call(fake_vllm: type) -> None:
    llm = VllmLLM(model="m")
    try:
        with pytest.raises(EngineDead, match="EngineDeadError"):
            llm.generate([ask("fine"), ask("now DIE")])
        with pytest.raises(EngineDead):  # and for every later call: the engine cannot serve again
            llm.generate([ask("fine")])
    finally:
        asyncio.run(llm.aclose())


def test_an_engine_that_stops_answering_is_taken_for_dead(fake_vllm: type) -> None:
    llm = VllmLLM(model="m", timeout_s=0.5)
    start = time.perf_counter()
    try:
        with pytest.raises(EngineDead, match="finished no request in 0.5 s"):
            llm.generate([ask("please HANG"), ask("also HANG")])
    finally:
        asyncio.run(llm.aclose())
    assert time.perf_counter() - start < 3.0


def test_pending_requests_are_bounded_by_max_num_seqs(fake_vllm: type) -> None:
    llm = VllmLLM(model="m", engine_options={"max_num_seqs": 4})

    async def main() -> list[Completion]:
        try:
            return await llm.agenerate([ask(f"q{i}") for i in range(30)])
        finally:
            await llm.aclose()

    done = asyncio.run(main())
    assert all(c.ok for c in done)
    (engine,) = fake_vllm.instances
    assert llm.max_pending == 5  # ceil(1.1 x 4 x 1 stage)
    assert engine.max_running == 5


def test_tensor_parallel_engines_use_the_ray_executor(fake_vllm: type) -> None:
    llm = VllmLLM(model="m", engine_options={"tensor_parallel_size": 2, "pipeline_parallel_size": 2,
                                             "max_num_seqs": 10})
    try:
        (done,) = llm.generate([ask("q")])
    finally:
        asyncio.run(llm.aclose())
    args = fake_vllm.instances[0].engine_args
    assert done.ok and (args.tensor_parallel_size, args.pipeline_parallel_size) == (2, 2)
    assert args.distributed_executor_backend == "ray"
    assert llm.max_pending == 22  # ceil(1.1 x 10 seqs x 2 stages)


def test_a_mistral_prompt_is_its_chat_template_s_token_ids(fake_vllm: type) -> None:
    """vLLM 0.33 serves Mistral through mistral_common (tokenizer_mode auto): the prompt's ids are the
    tokenizer's own chat encoding, with one BOS and [INST]/[/INST] as control tokens, not text."""
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    llm = VllmLLM(model="mistralai/Mistral-7B-Instruct-v0.3")
    request = ask("who wrote dracula")
    try:
        (done,) = llm.generate([request])
    finally:
        asyncio.run(llm.aclose())
    (engine,) = fake_vllm.instances
    tokenizer = engine.tokenizer
    assert tokenizer.IS_MISTRAL_TOKENIZER
    (ids,) = engine.prompt_ids
    inst, end = (tokenizer.tokenizer.get_special_token(t) for t in ("[INST]", "[/INST]"))
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
    assert ids[1] == inst and ids[-1] == end
    reference = tokenizer.mistral.encode_chat_completion(ChatCompletionRequest.from_openai(
        messages=[{"role": m.role, "content": m.content} for m in request.messages]))
    assert ids == reference.tokens
    assert done.ok and done.text == "echo: who wrote dracula"


@pytest.mark.parametrize(("version", "supported"), [("0.11.0", True), ("0.33.0", True), ("0.33.1", True),
                                                    ("0.10.2", False), ("0.34.0", False), ("not-a-version", False)])
def test_vllm_version_problem_names_the_supported_range(version: str, supported: bool) -> None:
    from kifqa.llm.vllm_engine import vllm_version_problem

    problem = vllm_version_problem(version)
    if supported:
        assert problem is None
    else:
        assert problem is not None and version in problem and ">=0.11" in problem and "kifqa[vllm]" in problem


def test_the_vllm_extra_installs_the_supported_range() -> None:
    import tomllib

    from packaging.requirements import Requirement

    from kifqa.llm.vllm_engine import VLLM_SUPPORTED

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    (requirement,) = (Requirement(r) for r in pyproject["project"]["optional-dependencies"]["vllm"])
    assert requirement.name == "vllm" and requirement.specifier == VLLM_SUPPORTED


def test_an_unsupported_vllm_fails_the_engine_with_what_to_install(fake_vllm: type,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.10.2")
    llm = VllmLLM(model="m")
    try:
        with pytest.raises(LLMError, match=r"vLLM 0\.10\.2 .*pip install 'kifqa\[vllm\]'"):
            llm.generate([ask("q")])
    finally:
        asyncio.run(llm.aclose())
    assert not fake_vllm.instances
