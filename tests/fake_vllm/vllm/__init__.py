"""A CPU stand-in for the slice of vLLM that kifqa's ``vllm`` backend calls (tests only).

Same names and signatures as vLLM 0.33 (``vllm.AsyncEngineArgs``, ``vllm.AsyncLLMEngine``,
``vllm.SamplingParams``, ``vllm.sampling_params.StructuredOutputsParams``/``RequestOutputKind``,
``vllm.outputs.RequestOutput``/``CompletionOutput``, ``vllm.inputs.TokensPrompt``,
``vllm.v1.engine.exceptions.EngineDeadError``, ``vllm.tokenizers.mistral.MistralTokenizer``). The "model"
answers ``(fake | grammar | ?x)`` under a grammar and ``echo: <last user message>`` otherwise; a prompt
sharing a token prefix with an earlier one reports those tokens as cached.
"""

from __future__ import annotations

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.engine.async_llm_engine import AsyncLLMEngine
from vllm.inputs import TextPrompt, TokensPrompt
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.sampling_params import SamplingParams

__version__ = "0.33.0"

__all__ = ["__version__", "AsyncEngineArgs", "AsyncLLMEngine", "CompletionOutput", "RequestOutput", "SamplingParams",
           "TextPrompt", "TokensPrompt"]
