"""The model layer: chat requests in, completions out, from llama.cpp, an OpenAI-compatible
server or vLLM, optionally behind a record/replay cache. Start from :func:`open_llm`."""

from __future__ import annotations

from kifqa.llm.base import LLM, ChatRequest, Completion, Message, Usage
from kifqa.llm.cache import CachedLLM
from kifqa.llm.factory import open_backend, open_llm
from kifqa.llm.local import LocalLLM
from kifqa.llm.openai_compat import OpenAILLM
from kifqa.llm.vllm_engine import VllmLLM

__all__ = [
    "LLM",
    "CachedLLM",
    "ChatRequest",
    "Completion",
    "LocalLLM",
    "Message",
    "OpenAILLM",
    "Usage",
    "VllmLLM",
    "open_backend",
    "open_llm",
]
