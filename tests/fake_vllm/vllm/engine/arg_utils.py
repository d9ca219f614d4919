"""``vllm.engine.arg_utils`` stand-in: the engine arguments kifqa may set."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AsyncEngineArgs:
    """A few of vLLM's ``AsyncEngineArgs`` fields, with vLLM's defaults."""

    model: str = "facebook/opt-125m"
    tokenizer_mode: str = "auto"
    max_model_len: int | None = None
    enable_prefix_caching: bool | None = None
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int | None = None
    seed: int | None = 0
    enforce_eager: bool = False
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    distributed_executor_backend: str | None = None
