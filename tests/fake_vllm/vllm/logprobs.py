"""``vllm.logprobs`` stand-in."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


#: {token_id: Logprob} for each sampled position: the sampled token, then the ``logprobs`` most likely others.
SampleLogprobs = list[dict[int, Logprob]]
