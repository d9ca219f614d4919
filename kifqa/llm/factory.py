"""``open_llm``: the model the settings name, wrapped in the record/replay cache when one is set."""

from __future__ import annotations

import os

from kifqa.config import Settings
from kifqa.errors import ConfigError
from kifqa.llm.base import LLM
from kifqa.llm.cache import CachedLLM
from kifqa.llm.local import LocalLLM
from kifqa.llm.openai_compat import OpenAILLM
from kifqa.llm.spread import SpreadLLM
from kifqa.llm.vllm_engine import VllmLLM


def open_llm(settings: Settings, *, instances: int = 1) -> LLM:
    """The configured backend (not loaded yet: models load on first use), behind the cache if
    ``settings.llm.cache`` is set and ``cache_mode`` is not ``off``. ``instances`` > 1 opens that
    many model instances in this process, spread by :class:`SpreadLLM`."""
    llm = open_backend(settings) if instances <= 1 else SpreadLLM([open_backend(settings) for _ in range(instances)])
    cfg = settings.llm
    if cfg.cache is not None and cfg.cache_mode != "off":
        return CachedLLM(llm, path=cfg.cache, mode=cfg.cache_mode)
    return llm


def in_process_instances(settings: Settings, *, share: int = 1) -> int:
    """Model instances an in-process command (``kifqa eval``, ``silver``, ``bench examples``) opens:
    ``batch.llm_actors`` (``auto``: every core of this machine, as the batch job's actors), divided
    among ``share`` processes."""
    return max(1, settings.batch.llm_actor_count(settings.llm) // share)


def open_backend(settings: Settings) -> LLM:
    """The backend ``settings.llm.backend`` names, configured from ``settings.llm``."""
    cfg = settings.llm
    if cfg.backend == "local":
        return LocalLLM(
            model=cfg.model,
            cache_dir=settings.cache_dir,
            context=cfg.context,
            parallel=cfg.parallel,
            decoding=cfg.decoding,
            threads=cfg.threads,
            timeout_s=cfg.timeout_s,
            persist_blocks=cfg.persist_blocks,
            state_dir=cfg.block_dir,
            options=cfg.extra,
        )
    if cfg.backend == "openai":
        if not cfg.base_url:
            raise ConfigError("llm.base_url is needed for the openai backend (e.g. http://127.0.0.1:8080/v1)")
        return OpenAILLM(
            model=cfg.model,
            base_url=cfg.base_url,
            api_key=os.environ.get(cfg.api_key_env),
            server=cfg.server,
            max_concurrency=cfg.max_concurrency,
            timeout_s=cfg.timeout_s,
            resilience=cfg.resilience,
            body=cfg.extra,
            max_response_bytes=cfg.max_response_bytes,
        )
    if cfg.backend == "gold":
        from kifqa.data.pool import gold_examples
        from kifqa.llm.gold import GoldLLM

        return GoldLLM(gold_examples(settings.data_dir))
    return VllmLLM(model=cfg.model, context=cfg.context, timeout_s=cfg.timeout_s, engine_options=cfg.extra)
