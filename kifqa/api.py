"""The Python API: answer a question in-process, on the defaults or on objects you pass."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kifqa.config import Settings
from kifqa.examples.sources import ExampleSource
from kifqa.kb.base import KnowledgeBase
from kifqa.llm.base import LLM
from kifqa.pipeline import Pipeline
from kifqa.types import Question, Result


@asynccontextmanager
async def open_pipeline(*, settings: Settings | None = None, kb: KnowledgeBase | None = None,
                        llm: LLM | None = None, examples: ExampleSource | None = None,
                        instances: int = 1) -> AsyncIterator[Pipeline]:
    """A :class:`Pipeline` on ``settings``; what you pass in is used as is (and not closed),
    what the settings name is opened here and closed on exit (the model as ``instances`` instances,
    see :func:`~kifqa.llm.open_llm`)."""
    from kifqa.kb.spec import open_kb
    from kifqa.llm import open_llm

    settings = settings or Settings.load()
    own_kb = kb is None
    own_llm = llm is None
    kb = kb or open_kb(settings.kb.spec, settings)
    try:
        llm = llm or open_llm(settings, instances=instances)
        try:
            yield Pipeline.from_settings(kb=kb, llm=llm, settings=settings, examples=examples)
        finally:
            if own_llm:
                await llm.aclose()
    finally:
        if own_kb:
            await kb.aclose()


async def aanswer(question: str | Question, *, kb: str | KnowledgeBase | None = None,
                  llm: str | LLM | None = None, settings: Settings | None = None,
                  **overrides: Any) -> Result:
    """Answers one question. ``kb`` and ``llm`` are objects, or a KB spec and a model name that
    override the settings; ``overrides`` are further :class:`Settings` sections, merged into them and validated
    (``pipeline={"max_entities": 5}``)."""
    settings = settings or Settings.load()
    if isinstance(kb, str):
        settings = settings.override(kb={"spec": kb})
    if isinstance(llm, str):
        settings = settings.override(llm={"model": llm})
    if overrides:
        settings = settings.override(**overrides)
    async with open_pipeline(settings=settings, kb=kb if isinstance(kb, KnowledgeBase) else None,
                             llm=llm if isinstance(llm, LLM) else None) as pipeline:
        return await pipeline.answer(question)


def answer(question: str | Question, **kwargs: Any) -> Result:
    """Sync form of :func:`aanswer`."""
    return asyncio.run(aanswer(question, **kwargs))
