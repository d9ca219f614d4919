"""The Arrow schemas of a run folder's Parquet files: one row per answer statement (``answers/``) and
one row per question (``traces/``; rows of :meth:`kifqa.types.Trace.to_row`)."""

from __future__ import annotations

import pyarrow as pa

ANSWER_SCHEMA = pa.schema([
    ("question_id", pa.string()),
    ("question", pa.string()),
    ("kb", pa.string()),
    ("subject", pa.string()),
    ("subject_label", pa.string()),
    ("property", pa.string()),
    ("property_label", pa.string()),
    ("value", pa.string()),
    ("value_label", pa.string()),
    ("value_type", pa.string()),
    ("answer", pa.string()),
    ("answer_label", pa.string()),
])

TRACE_SCHEMA = pa.schema([
    ("question_id", pa.string()),
    ("question", pa.string()),
    ("kb", pa.string()),
    ("model", pa.string()),
    ("draft", pa.list_(pa.string())),
    ("entities", pa.list_(pa.string())),
    ("relations", pa.list_(pa.string())),
    ("n_answers", pa.int32()),
    ("llm_calls", pa.int32()),
    ("llm_cache_hits", pa.int32()),
    ("prompt_tokens", pa.int64()),
    ("uncached_prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
    ("kb_calls", pa.int32()),
    ("seconds", pa.float64()),
    ("error", pa.string()),
    ("error_step", pa.string()),
    ("trace", pa.string()),
])
