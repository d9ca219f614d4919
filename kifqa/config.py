"""Settings: one object read from defaults, a YAML file, ``KIFQA_*`` environment variables and CLI flags."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.config import JsonDict
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from kifqa.errors import ConfigError

#: The mark of a runtime-only setting (``Field(..., json_schema_extra=RUNTIME)``): it changes how a job runs
#: but not what it writes, so a rerun may change it and resume the same job (see :meth:`Settings.shaping`).
RUNTIME: JsonDict = {"runtime": True}
#: The rule of the job key: a setting counts when it can change an answer (which model, knowledge base, prompts,
#: pipeline, examples, decoding); resources, parallelism, memory, where the data is read from and which endpoint
#: serves the model (``llm.model`` names it) are runtime-only. ``llm.extra`` holds a backend's options: these
#: set its resources (vLLM's ``AsyncEngineArgs``, llama.cpp's ``CommonParams``) and are runtime-only too; any
#: other option counts. Floating-point sums may differ in the last bit as batches do; runs with the same settings
#: already vary that way.
RUNTIME_EXTRA = frozenset({
    "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size",
    "pipeline_parallel_size", "swap_space", "cpu_offload_gb", "kv_cache_memory_bytes", "enforce_eager",
    "enable_prefix_caching", "enable_chunked_prefill", "distributed_executor_backend", "download_dir",
    "disable_log_stats", "max_parallel_loading_workers",
    "n_gpu_layers", "main_gpu", "split_mode", "tensor_split", "n_batch", "n_ubatch", "n_threads_http",
    "cache_ram_mib", "numa",
})

#: Where the shared development data lives relative to a checkout (see the README).
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


class Section(BaseModel):
    """A section of the settings: it refuses keys it does not know (a typo fails, it is not ignored)."""

    model_config = ConfigDict(extra="forbid")


class Resilience(Section):
    """How calls to one remote endpoint are retried and when its circuit opens (:mod:`kifqa.resilience`,
    docs/reliability.md); these defaults are the knowledge base's."""

    #: Further attempts after a throttled (429), unavailable (5xx), connection, timeout or malformed failure.
    retries: int = 3
    #: Backoff: the n-th retry waits a random time up to ``min(max_backoff_s, backoff_s * 2**(n-1))``
    #: (a ``Retry-After`` answer waits what it says, capped, and holds every call of the endpoint meanwhile).
    backoff_s: float = 0.5
    max_backoff_s: float = 10.0
    #: Consecutive failed attempts (5xx, connection, timeout, malformed) that open the circuit: the
    #: endpoint then gets no request for ``breaker_cooldown_s`` and calls fail at once; 0 disables it.
    breaker_failures: int = 10
    breaker_cooldown_s: float = 30.0
    #: Seconds calls wait out an open circuit before failing (0: at once); batch jobs use ``batch.max_outage_s``.
    max_outage_s: float = Field(default=0.0, ge=0)


class LLMResilience(Resilience):
    """:class:`Resilience` with the model server's defaults: more retries, and a longer cap on backoff,
    which also caps a ``Retry-After``."""

    retries: int = 4
    max_backoff_s: float = 30.0


class Mirror(Section):
    """Where the requests meant for one public service go instead: a mirror or a stand-in (``kb.endpoints``)."""

    #: The URL that replaces the service's own (its SPARQL endpoint, ``api.php`` or Lookup search URL).
    url: str = Field(pattern=r"^https?://[^/\s]+")
    #: The SPARQL the mirror understands: ``blazegraph`` (WDQS's named subqueries and ``wikibase:`` functions)
    #: or ``standard`` (SPARQL 1.1: QLever, Virtuoso, Oxigraph); ``None``: the service's own (WDQS: Blazegraph).
    dialect: Literal["blazegraph", "standard"] | None = None


#: The public services ``kb.endpoints`` may redirect; ``query-scholarly.wikidata.org`` is WDQS's scholarly-article
#: graph, on its own host since 2025 (a scholarly article's statements are only there).
PUBLIC_SERVICES = ("query.wikidata.org", "query-scholarly.wikidata.org", "www.wikidata.org", "dbpedia.org",
                   "lookup.dbpedia.org")


class KBSettings(Section):
    """Which knowledge base to query and how politely."""

    spec: str = "local"
    #: Largest number of statements one filter may return (also Oxigraph's page size).
    max_results: int = 10_000
    #: Per-request timeout in seconds.
    timeout_s: float = Field(default=30.0, json_schema_extra=RUNTIME)
    #: Most KB calls one knowledge base runs at once, on its store and on its search each.
    max_concurrency: int = Field(default=8, json_schema_extra=RUNTIME)
    #: Most concurrent lookups (``properties_of``, ``facts``; ``named`` where there is no label index) coalesced
    #: into one query; 1: one query each.
    batch_size: int = Field(default=64, ge=1, json_schema_extra=RUNTIME)
    #: How long a batch waits for more lookups after its first one, in seconds.
    batch_wait_s: float = Field(default=0.005, ge=0, json_schema_extra=RUNTIME)
    #: Retries of a result the endpoint cut short (``X-SPARQL-MaxRows``); then the call fails.
    truncated_retries: int = Field(default=1, json_schema_extra=RUNTIME)
    #: Bytes of one SPARQL answer read at most (decompressed); past them reading stops and the call fails
    #: (a batch of 64 lookups at ``max_results`` rows is a few MB).
    max_response_bytes: int = Field(default=64 * 2**20, ge=1024, json_schema_extra=RUNTIME)
    #: Retries, backoff and circuit breaker of the store's and the search's endpoints.
    resilience: Resilience = Field(default_factory=Resilience, json_schema_extra=RUNTIME)
    #: Your contact (a URL or e-mail) for the User-Agent of remote calls: required by the public Wikidata
    #: and DBpedia endpoints (Wikimedia's User-Agent policy); ``KIFQA_KB__CONTACT`` sets it.
    contact: str = Field(default="", json_schema_extra=RUNTIME)
    #: Port of ``kifqa kb serve`` and of the ``local-server`` spec.
    server_port: int = Field(default=7878, json_schema_extra=RUNTIME)
    #: A mirror or stand-in for each public service (:data:`PUBLIC_SERVICES`, by host name) that ``wikidata``
    #: and ``dbpedia`` query instead, through the same plugins, limits and retries; a plain URL string is taken
    #: as ``{url: ...}``.
    endpoints: dict[str, Mirror] = Field(default_factory=dict)
    #: The Wikidata API's ``maxlag`` (seconds of replication lag above which it refuses and asks to come back):
    #: Wikimedia asks automated clients for 5; ``None`` sends none.
    maxlag_s: int | None = Field(default=5, ge=1, json_schema_extra=RUNTIME)
    #: Where ``wikidata`` looks statements and terms up: ``api`` (forward lookups, labels and datatypes from the
    #: Wikidata API's ``wbgetentities``, 50 entities a request; only inverse lookups on WDQS, coalesced across
    #: questions) or ``sparql`` (every lookup through KIF's ``wdqs`` store).
    wikidata_lookups: Literal["api", "sparql"] = "api"

    @field_validator("endpoints", mode="before")
    @classmethod
    def _url_is_mirror(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        unknown = sorted(set(value) - set(PUBLIC_SERVICES))
        if unknown:
            raise ValueError(f"kb.endpoints maps public services by host name; {', '.join(unknown)} is none of "
                             f"{', '.join(PUBLIC_SERVICES)}")
        return {host: {"url": v} if isinstance(v, str) else v for host, v in value.items()}


class LLMSettings(Section):
    """Which model answers and how it is served."""

    #: ``gold`` answers SimpleQuestions-Wikidata questions from their gold at no cost (benchmarks, tests).
    backend: Literal["local", "openai", "vllm", "gold"] = "local"
    #: ``qwen2.5-coder-1.5b`` (default), ``qwen2.5-coder-0.5b``, a GGUF path, or a served model name.
    model: str = "qwen2.5-coder-1.5b"
    #: ``openai``: the server's address (runtime-only: ``model`` names what it serves).
    base_url: str | None = Field(default=None, json_schema_extra=RUNTIME)
    api_key_env: str = Field(default="OPENAI_API_KEY", json_schema_extra=RUNTIME)
    max_concurrency: int = Field(default=8, json_schema_extra=RUNTIME)
    timeout_s: float = Field(default=120.0, json_schema_extra=RUNTIME)
    #: ``openai``: bytes of one answer read at most (decompressed); past them reading stops and the request
    #: fails (a completion of a few thousand tokens is some kB).
    max_response_bytes: int = Field(default=8 * 2**20, ge=1024, json_schema_extra=RUNTIME)
    #: SQLite record/replay cache; ``None`` (or an empty value, ``KIFQA_LLM__CACHE=``) disables it.
    cache: Path | None = Field(default=None, json_schema_extra=RUNTIME)
    #: ``record`` (read and write), ``replay`` (read only; a miss is an error) or ``off``.
    cache_mode: Literal["record", "replay", "off"] = Field(default="record", json_schema_extra=RUNTIME)
    threads: int = Field(default=1, json_schema_extra=RUNTIME)
    context: int = 4096
    #: ``local``: llama.cpp slots decoded together (each keeps its own prompt cache; see docs/llm.md).
    parallel: int = Field(default=4, ge=1, json_schema_extra=RUNTIME)
    #: ``local``: requests decoded at once per instance (at most ``parallel``); the others wait their
    #: turn while every slot keeps its block. On a CPU that decodes several sequences no faster than one
    #: by one, 1 answers each request sooner at the same throughput (docs/llm.md).
    decoding: int = Field(default=1, ge=1, json_schema_extra=RUNTIME)
    #: ``local``: keep each few-shot block's KV state under ``cache_dir/kv`` and restore it instead
    #: of evaluating the block (once per machine and model; see docs/llm.md).
    persist_blocks: bool = Field(default=True, json_schema_extra=RUNTIME)
    #: ``local``: where the block states are kept (default ``cache_dir/kv``).
    block_dir: Path | None = Field(default=None, json_schema_extra=RUNTIME)
    #: ``openai``: how the server takes a grammar: ``llamacpp`` (``grammar``), ``vllm``
    #: (``structured_outputs``, vLLM >= 0.11), ``vllm-legacy`` (``guided_grammar``, vLLM < 0.12)
    #: or ``openai`` (hosted APIs: no grammar).
    server: Literal["llamacpp", "vllm", "vllm-legacy", "openai"] = "llamacpp"
    #: ``openai``: retries, backoff and circuit breaker of the model server.
    resilience: LLMResilience = Field(default_factory=LLMResilience, json_schema_extra=RUNTIME)
    #: Backend-specific options: ``xllamacpp.CommonParams`` attributes (``local``), extra request
    #: body fields (``openai``) or ``vllm.AsyncEngineArgs`` fields (``vllm``).
    extra: dict[str, Any] = Field(default_factory=dict)


    @property
    def in_flight(self) -> int:
        """Requests the backend serves at once: how many questions an in-process run keeps going."""
        return self.max_concurrency if self.backend in ("openai", "vllm") else self.parallel

    @property
    def requests_per_call(self) -> int:
        """Requests the batch job sends an LLM actor in one Ray call: as many as the backend answers side by
        side (a call returns when its last request is answered): ``decoding`` for llama.cpp (1 by default: a
        call per request), ``max_concurrency`` for a server or vLLM, 64 for the zero-cost ``gold`` model."""
        if self.backend == "gold":
            return 64
        return self.decoding if self.backend == "local" else self.max_concurrency

    @field_validator("cache", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

class ExamplesSettings(Section):
    """Few-shot examples for the draft step."""

    #: ``clustered`` (a block shared by the questions of a pool cluster; see docs/llm.md), ``retrieved``
    #: (the ``k`` pool questions closest to each question) or ``fixed`` (the same hand-written set).
    mode: Literal["clustered", "retrieved", "fixed"] = "clustered"
    #: ``retrieved``: examples per question.
    k: int = 5
    #: ``clustered``: clusters of the pool (one block each), examples per block, and examples
    #: closest to the question appended after the block.
    clusters: int = Field(default=32, ge=1)
    block: int = Field(default=8, ge=1)
    nearest: int = Field(default=0, ge=0)
    #: The example pool (:mod:`kifqa.examples.pool`): ``sqwd`` (SimpleQuestions-Wikidata's training split),
    #: ``sdbqa`` (SimpleDBpediaQA's validation questions before the held-out 700+), or a pool file (JSONL, CSV or
    #: Parquet: question, entity, property, direction). Unset: the base's own (``sdbqa`` for the DBpedia bases).
    pool: str | None = None
    #: The language of a pool file's questions (ISO 639-1): rules written for English fire only for English pools.
    language: str = "en"
    #: Use only the first N questions of the pool (tests); ``None`` uses all of it.
    pool_limit: int | None = None


class PipelineSettings(Section):
    """Limits and switches of the five steps. General limits first, then the rules that read the example pool (its
    precedent votes, its priors), then the second-draft policy (:mod:`kifqa.pipeline.redraft`). What each rule
    gained and cost on the tuning sets is in docs/results.md."""

    #: Longer questions are refused as input errors.
    max_question_chars: int = 1000
    #: Candidates asked of the search for a label.
    search_limit: int = 50
    #: Exactly named entities carried on to the relation step.
    max_entities: int = 10
    #: Near-match entities carried on when nothing is named exactly.
    max_near_entities: int = 5
    #: Options shown to the model in the relation step at most; of those, only the ones the first leads by less
    #: than ``sure_lead`` (:func:`~kifqa.pipeline.relations.contenders`).
    max_options: int = 12
    #: How the relation step ranks the options the draft does not name exactly: ``meaning``, by the closeness
    #: of each property's label and description to the question and the predicate (the question encoder,
    #: the ``embeddings`` extra); ``names``, by spelling and shared words only.
    rank_relations: Literal["meaning", "names"] = "meaning"
    #: How many of the example pool's questions nearest to the question (as written, and with its entity masked)
    #: vote for the relation options: each option's score gains with the share of them that ask for its property
    #: in its direction (0: no votes, and none of the rules below that read them).
    precedent_neighbours: int = 20
    #: A rule written for a dataset convention (:mod:`kifqa.examples.priors`: the name before a comma, an answer
    #: the question offers, the article before a name, a handle's digits) fires only where the example pool bears
    #: the convention out: in at least this share of the pool's questions its rule would act on...
    prior_share: float = Field(default=0.5, ge=0.0, le=1.0)
    #: ... and in at least this many of them: one example is an accident of the pool, not its convention (0 with
    #: ``prior_share`` 0: every such rule fires, whatever the pool).
    prior_least: int = Field(default=2, ge=0)
    #: Let the votes take another option over the one the draft's predicate names exactly, where they ask for it
    #: far more (:func:`~kifqa.pipeline.relations.overruling`).
    overrule: bool = True
    #: The relation step takes its first option without asking the model when the option's score leads the
    #: second's by this much (``None``: only an exactly named or lone option). Where the model is asked, it is
    #: shown only the options within this lead of the first.
    sure_lead: float | None = 0.1
    #: Constrain the draft's known entity to runs of the question's words.
    constrain_draft: bool = True
    #: Replace the draft's known entity with the longest run of the question's words that holds it and is
    #: exactly an item's label or alias (``iran`` -> ``anglo-soviet invasion of iran``), where the base can tell.
    widen_known: bool = True
    #: Where the draft's known entity follows a comma (and is not widened), take the run before the comma that is
    #: exactly an item's label or alias, the longest: the name after a comma qualifies the one before it
    #: ("massachusetts" in "born in new bedford, massachusetts", a person's title after their name), where the
    #: example pool bears that out (``prior_share``).
    comma_known: bool = True
    #: Where the first draft's best relation option scores below this, or it has none (no item, or no statement),
    #: draft again with the known entity one of the question's runs that name an item exactly and are not part of
    #: the first draft's (a description drafted as the entity: "english professional footballer" in "which retired
    #: english professional footballer was born in birmingham?"), and keep the draft whose best option scores
    #: higher; where the first found nothing, the second must itself score at least this (``None``: no second
    #: drafts before the choice).
    redraft_below: float | None = 0.3
    #: Where the first draft's known entity is an answer the question offers ("male" in "is X male or female?",
    #: :func:`~kifqa.examples.text.offered`), draft again as where it found nothing (needs ``redraft_below``, and
    #: an example pool whose offered answers are not its topics: ``prior_share``).
    redraft_offered: bool = True
    #: How many second drafts: 1, one whose grammar admits every such run (the model chooses the name); more,
    #: one for each of the first this many of them (the outermost, longest first), the best option deciding
    #: between them.
    redraft_each: int = Field(default=3, ge=1)
    #: Where similar questions ask for none of the first draft's options (:func:`~kifqa.pipeline.relations.unasked`)
    #: but for a property the base has by that name, draft again as where it found nothing, and take the second
    #: draft only if they ask for its best option: "whats the name of a baseball pitcher" drafted over
    #: ``baseball``, then over ``pitcher`` (needs ``redraft_below``).
    redraft_unasked: bool = True
    #: Where the first draft is backward and answers with more than this many, it may have drafted the kind the
    #: question asks for as its known entity ("Who's an actor from pittsburgh" as ``(?x | occupation | actor)``):
    #: draft again as where it found nothing, and where similar questions ask for that draft's option more, the
    #: same way round (:func:`~kifqa.pipeline.relations.narrows`), and it answers with fewer, but some, take it as
    #: the main pattern and the first as its constraint (``None``: never).
    redraft_over: int | None = Field(default=50, ge=1)


class EndpointLimit(Section):
    """One limit on the requests to one endpoint, shared by every KB actor of a job."""

    #: Requests in flight at once.
    max_concurrent: int = Field(default=5, ge=1)
    #: Requests started per second; ``None`` for no rate limit.
    per_second: float | None = Field(default=None, gt=0)
    #: Query seconds per second the requests may use (WDQS allows 1.0); kept under, never probed.
    #: ``None``: no budget.
    budget_s_per_s: float | None = Field(default=None, gt=0)
    #: What the endpoint charges each request beyond its own time (WDQS: about 0.2 s), in seconds.
    charge_s: float = Field(default=0.0, ge=0)
    #: Query seconds the requests may use in a burst above ``budget_s_per_s``.
    burst_s: float = Field(default=10.0, ge=0)


#: The Wikidata Query Service's limit: 5 in flight, 5 per second, 90 % of its 60 s per 60 s of query time.
WDQS_LIMIT = EndpointLimit(max_concurrent=5, per_second=5.0, budget_s_per_s=0.9, charge_s=0.2)


#: The Wikidata API's limit: serial requests (Wikimedia's API etiquette), at most 10 a second.
WIKIDATA_API_LIMIT = EndpointLimit(max_concurrent=1, per_second=10.0)
#: DBpedia's SPARQL endpoint's published fair use: 50 connections and 100 requests a second per address.
DBPEDIA_SPARQL_LIMIT = EndpointLimit(max_concurrent=50, per_second=100.0)
#: DBpedia Lookup's (it publishes no rate): a few in flight, 10 a second.
DBPEDIA_LOOKUP_LIMIT = EndpointLimit(max_concurrent=2, per_second=10.0)


def _default_limits() -> dict[str, EndpointLimit]:
    return {
        "query.wikidata.org": WDQS_LIMIT,
        "query-scholarly.wikidata.org": WDQS_LIMIT,
        "www.wikidata.org": WIKIDATA_API_LIMIT,
        "dbpedia.org": DBPEDIA_SPARQL_LIMIT,
        "lookup.dbpedia.org": DBPEDIA_LOOKUP_LIMIT,
    }


class BatchSettings(Section):
    """How ``kifqa run`` spreads a corpus over a Ray cluster (see docs/batch.md)."""

    #: The corpus (JSONL, CSV or Parquet) and the output folder, local paths or URIs (``s3://bucket/key``);
    #: the command line may give them.
    corpus: str | Path | None = Field(default=None, json_schema_extra=RUNTIME)
    out: str | Path | None = Field(default=None, json_schema_extra=RUNTIME)
    #: Column names of the corpus; ids are generated (``q000001``...) when the id column is absent.
    id_column: str = "id"
    question_column: str = "question"
    #: Questions per shard: one Ray task, one pair of Parquet files.
    shard_size: int = Field(default=100, ge=1)
    #: Questions one task runs concurrently.
    task_concurrency: int = Field(default=32, ge=1, json_schema_extra=RUNTIME)
    #: Shard tasks in flight at once; ``auto``: :meth:`max_task_count` (one per core of the cluster).
    max_tasks: int | Literal["auto"] = Field(default="auto", json_schema_extra=RUNTIME)
    #: Reruns of a shard task whose worker died.
    task_max_retries: int = Field(default=3, ge=0, json_schema_extra=RUNTIME)
    #: Seconds of its own one question may take before it is given up with an error trace: its clock stops while
    #: any of its KB calls is out (waiting for the hosts' limits is not its time; :mod:`kifqa.batch.clock`).
    question_timeout_s: float = Field(default=600.0, gt=0, json_schema_extra=RUNTIME)
    #: While the KB's or the model endpoint's circuit is open, questions wait (bounded by
    #: ``question_timeout_s``) instead of failing; an outage longer than this many seconds fails the
    #: calls at once, with errors that say so (``--retry-failed`` completes the job later).
    max_outage_s: float = Field(default=300.0, ge=0, json_schema_extra=RUNTIME)
    #: LLM actors, each holding one model (one llama.cpp process or one vLLM engine); ``auto``:
    #: :meth:`llm_actor_count` (every core for the local backend). In-process commands (``kifqa eval``,
    #: ``silver``, ``bench examples``) open as many model instances by the same rule.
    llm_actors: int | Literal["auto"] = Field(default="auto", json_schema_extra=RUNTIME)
    llm_actor_cpus: float = Field(default=1.0, ge=0, json_schema_extra=RUNTIME)
    llm_actor_gpus: float = Field(default=0.0, ge=0, json_schema_extra=RUNTIME)
    #: Times Ray restarts an LLM actor whose process died (a dead vLLM engine ends it); -1: without end. An
    #: actor past them leaves the pool's routing, and with none left every model call fails saying so.
    llm_actor_max_restarts: int = Field(default=2, ge=-1, json_schema_extra=RUNTIME)
    #: Requests one LLM actor accepts at once (they reach the backend together).
    llm_actor_concurrency: int = Field(default=64, ge=1, json_schema_extra=RUNTIME)
    #: KB actors, each holding its own knowledge base (KIF store and search).
    kb_actors: int | Literal["auto"] = Field(default="auto", json_schema_extra=RUNTIME)
    kb_actor_concurrency: int = Field(default=32, ge=1, json_schema_extra=RUNTIME)
    #: Where a job opens the knowledge base: ``actors``, a pool of KB actors that every shard task calls
    #: (one endpoint limit for all of them, the lookups of all tasks coalesced); ``tasks``, each shard
    #: task's worker opens its own (no Ray call per lookup, a task's lookups coalesced; only for an
    #: endpoint ``limits`` does not name); ``auto``: ``tasks`` unless ``limits`` names the KB's endpoint.
    kb_placement: Literal["auto", "actors", "tasks"] = Field(default="auto", json_schema_extra=RUNTIME)
    #: Per-endpoint limits by host name, shared by all KB actors; unlisted endpoints are unlimited.
    limits: dict[str, EndpointLimit] = Field(default_factory=_default_limits, json_schema_extra=RUNTIME)
    #: Cache KB results in ``cache_dir`` (shared by all actors and reruns).
    kb_cache: bool = Field(default=True, json_schema_extra=RUNTIME)
    #: Skip shards a previous run with the same config finished.
    resume: bool = Field(default=True, json_schema_extra=RUNTIME)
    #: Rerun the questions whose trace has an error (input errors excepted).
    retry_failed: bool = Field(default=False, json_schema_extra=RUNTIME)
    #: The Ray cluster to join (``auto``, ``ray://host:10001``); ``None`` joins a running one or starts one.
    ray_address: str | None = Field(default=None, json_schema_extra=RUNTIME)

    @field_validator("llm_actors", "kb_actors", "max_tasks")
    @classmethod
    def _at_least_one(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("at least 1, or auto")
        return value

    def job_paths(self, corpus: str | Path | None, out: str | Path | None) -> tuple[str | Path, str | Path]:
        """A job's corpus and output folder: those given, else ``corpus`` and ``out`` of these settings;
        :class:`ConfigError` where either is missing."""
        corpus, out = corpus or self.corpus, out or self.out
        if not corpus or not out:
            raise ConfigError("a job needs a corpus and an output folder (arguments or batch.corpus/batch.out)")
        return corpus, out

    def max_task_count(self, *, cpus: int | None = None) -> int:
        """``max_tasks``, with ``auto`` resolved: one shard task per core of the ``cpus`` (default: this
        machine's). A task spends its CPU on its questions' embeddings, knowledge-base lookups and traces;
        more tasks than cores only take turns on them (docs/batch.md)."""
        if self.max_tasks != "auto":
            return self.max_tasks
        return max(1, cpus or os.cpu_count() or 1)

    def llm_actor_count(self, llm: LLMSettings, *, cpus: int | None = None) -> int:
        """``llm_actors``, with ``auto`` resolved: for the local backend on CPU, one actor per
        ``llm.threads`` of the ``cpus`` cores (default: this machine's); shard tasks and KB actors
        reserve no core (they mostly wait for the model). Other backends: one (the server or GPU does the
        work; ask for more explicitly)."""
        if self.llm_actors != "auto":
            return self.llm_actors
        if llm.backend != "local" or self.llm_actor_gpus > 0:
            return 1
        return max(1, (cpus or os.cpu_count() or 1) // llm.threads)

    def kb_actor_count(self, *, cpus: int | None = None) -> int:
        """``kb_actors``, with ``auto`` resolved: one per 4 cores (a KB actor answers many questions at
        once, each call a short lookup), at least one."""
        if self.kb_actors != "auto":
            return self.kb_actors
        return max(1, (cpus or os.cpu_count() or 1) // 4)


class Settings(BaseSettings):
    """All of kifqa's settings.

    Environment variables use the ``KIFQA_`` prefix and ``__`` for nesting (``KIFQA_KB__SPEC=wikidata``);
    ``KIFQA_DATA_DIR`` and ``KIFQA_CACHE_DIR`` name the data and cache folders.
    """

    model_config = SettingsConfigDict(env_prefix="KIFQA_", env_nested_delimiter="__", extra="forbid")

    data_dir: Path = Field(default=DEFAULT_DATA_DIR, json_schema_extra=RUNTIME)
    cache_dir: Path = Field(default=Path.home() / ".cache" / "kifqa", json_schema_extra=RUNTIME)
    kb: KBSettings = Field(default_factory=KBSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    examples: ExamplesSettings = Field(default_factory=ExamplesSettings)
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings)
    batch: BatchSettings = Field(default_factory=BatchSettings)

    @model_validator(mode="after")
    def _one_gpu_per_parallel_worker(self) -> Settings:
        """vLLM's Ray executor runs a tensor- or pipeline-parallel engine as one worker per GPU, each in a
        placement-group bundle of one GPU (:func:`kifqa.batch.llmpool.llm_placement_groups`): other shares
        make bundles it refuses once the GPU actors start."""
        sizes = [self.llm.extra.get(n, 1) for n in ("tensor_parallel_size", "pipeline_parallel_size")]
        workers = sizes[0] * sizes[1] if all(isinstance(n, int) for n in sizes) else 1
        if self.llm.backend == "vllm" and workers > 1 and self.batch.llm_actor_gpus not in (0, 1):
            raise ValueError(
                f"batch.llm_actor_gpus is {self.batch.llm_actor_gpus:g}, but with tensor_parallel_size × "
                f"pipeline_parallel_size = {workers} vLLM runs a worker per GPU, one GPU each: set "
                f"batch.llm_actor_gpus: 1 (each actor then holds {workers} GPUs)")
        return self

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> Settings:
        """Settings from the defaults, an optional YAML file, ``KIFQA_*`` environment variables and
        ``overrides``, each beating the one before (nested sections are merged key by key).

        Raises :class:`~kifqa.errors.ConfigError` on an unreadable file, an unknown key or a bad value,
        naming the setting (``batch.llm_actor: unknown setting; did you mean llm_actors?``).
        """
        data: dict[str, Any] = {}
        if path is not None:
            try:
                loaded = yaml.safe_load(Path(path).read_text()) or {}
            except (OSError, yaml.YAMLError) as err:
                raise ConfigError(f"{path}: {_first_line(err)}") from err
            if not isinstance(loaded, dict):
                raise ConfigError(f"{path}: a settings file must hold a mapping")
            data = loaded
        config = cls.model_config
        env = EnvSettingsSource(cls, env_prefix=config.get("env_prefix"),
                                env_nested_delimiter=config.get("env_nested_delimiter"))()
        try:
            return cls(**_merge(_merge(data, env), overrides))
        except ValidationError as err:
            raise config_error(err, cls, file=path, data=data, env=env) from None

    def override(self, **changes: Any) -> Settings:
        """These settings with ``changes`` (sections as mappings, merged key by key), validated like a
        settings file: the one way to change settings (``settings.override(kb={"spec": "wikidata"})``).

        Raises :class:`~kifqa.errors.ConfigError` as :meth:`load` does.
        """
        try:
            return type(self).model_validate(_merge(self.model_dump(), changes))
        except ValidationError as err:
            raise config_error(err, type(self)) from None

    def with_batch_outages(self) -> Settings:
        """These settings with the KB and model endpoints waiting out outages of up to ``batch.max_outage_s``."""
        wait = {"resilience": {"max_outage_s": self.batch.max_outage_s}}
        return self.override(kb=wait, llm=wait)

    def shaping(self) -> dict[str, Any]:
        """The settings that shape what a job writes (JSON-ready): all but the fields marked :data:`RUNTIME`
        and the ``llm.extra`` options in :data:`RUNTIME_EXTRA`."""
        shaping = _shaping(type(self), self.model_dump(mode="json"))
        extra = shaping["llm"]["extra"]
        shaping["llm"]["extra"] = {key: value for key, value in extra.items() if key not in RUNTIME_EXTRA}
        return shaping

    def digest(self) -> str:
        """A short stable hash of these settings (for manifests and resume checks)."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def config_error(err: ValidationError, kind: type[BaseModel], *, file: str | Path | None = None,
                 data: dict[str, Any] | None = None, env: dict[str, Any] | None = None) -> ConfigError:
    """``err`` (validating a ``kind``) as one line that names each wrong setting by its dotted path (and
    where it came from: the ``KIFQA_*`` variable in ``env`` or the ``file`` whose content is ``data``),
    and for an unknown key the closest valid one."""
    problems = []
    for error in err.errors():
        loc = [str(part) for part in error["loc"]]
        name = ".".join(loc) or kind.__name__
        if env and _holds(env, loc):
            name = f"{name} (KIFQA_{'__'.join(loc).upper()})"
        elif file and data and _holds(data, loc):
            name = f"{file}: {name}"
        if error["type"] == "extra_forbidden":
            valid = list(_section_at(kind, loc[:-1]).model_fields)
            close = difflib.get_close_matches(loc[-1], valid, n=1)
            problems.append(f"{name}: unknown setting; " + (f"did you mean {close[0]}?" if close
                                                             else f"valid: {', '.join(valid)}."))
        else:
            problems.append(f"{name}: {error['msg'].rstrip('.')}.")
    return ConfigError(" ".join(problems))


def _holds(data: dict[str, Any], loc: list[str]) -> bool:
    """Whether the nested mappings ``data`` have a value at the path ``loc``."""
    for part in loc:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _section_at(kind: type[BaseModel], loc: list[str]) -> type[BaseModel]:
    """The settings model found at the dotted path ``loc`` below ``kind`` (through mappings of sections)."""
    section: Any = kind
    for part in loc:
        if isinstance(section, type) and issubclass(section, BaseModel):
            section = section.model_fields[part].annotation if part in section.model_fields else None
        elif get_origin(section) is dict:
            section = get_args(section)[1]
        if get_origin(section) in (Union, types.UnionType):
            section = next((a for a in get_args(section) if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return section if isinstance(section, type) and issubclass(section, BaseModel) else kind


def _first_line(err: Exception) -> str:
    return str(err).strip().partition("\n")[0]


def _shaping(kind: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a JSON dump of a ``kind``) without the fields marked :data:`RUNTIME`, at any depth."""
    out = {}
    for name, info in kind.model_fields.items():
        if info.json_schema_extra == RUNTIME:
            continue
        section = info.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            out[name] = _shaping(section, data[name])
        else:
            out[name] = data[name]
    return out


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``top``, nested mappings merged rather than replaced."""
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        merged[key] = _merge(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return merged
