"""The ready job configs and cluster files parse, name existing entry points and real settings."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import ray
import yaml
from pydantic import BaseModel
from ray.autoscaler._private.util import prepare_config, validate_config

from kifqa.batch.limiter import endpoint_limit
from kifqa.config import Settings
from kifqa.kb.spec import kb_routes

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "jobs" / "configs").glob("*.yaml"))
#: Where cluster/Dockerfile puts the repository in the image.
IMAGE_REPO = "/home/ray/kifqa/"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
#: The one Ray pin (pyproject.toml); the cluster files must name the same version.
[RAY_PIN] = [re.fullmatch(r"ray(?:\[[\w,]+\])?==([\d.]+)", d.split(";")[0].split("#")[0].strip()).group(1)
             for d in PROJECT["dependencies"] if re.match(r"ray\b", d)]
#: The tag `make image` builds (cluster/Dockerfile) and the cluster files run.
IMAGE = f"kifqa:{PROJECT['version']}"


def _unknown_keys(model: type[BaseModel], data: dict[str, Any], where: str = "") -> list[str]:
    """Keys of ``data`` that are no field of ``model`` (nested models too; dict-valued fields are free-form)."""
    unknown = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            unknown.append(f"{where}{key}")
        elif isinstance(value, dict) and isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            unknown += _unknown_keys(field.annotation, value, f"{where}{key}.")
    return unknown


def test_the_four_ready_configs_exist():
    assert [c.name for c in CONFIGS] == [
        "dbpedia-vllm-mistral.yaml", "local-cpu.yaml", "openai-endpoint.yaml", "wikidata-vllm-llama.yaml"]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_a_config_loads_and_names_only_real_settings(path: Path):
    raw = yaml.safe_load(path.read_text())
    assert _unknown_keys(Settings, raw) == []
    settings = Settings.load(path)
    b = settings.batch
    assert b.corpus and b.out, "a Ray Job is given only --config: the config names corpus and output"
    host = kb_routes(settings).host
    assert host is None or host in b.limits, "a remote endpoint has a shared limit"
    if settings.llm.backend == "vllm":
        assert b.llm_actor_gpus == 1, "one vLLM engine per GPU"
    if settings.llm.backend == "local":
        assert settings.llm.threads == 1 and b.llm_actor_cpus == 1


def test_the_entry_points_run():
    for script in (["jobs/answer.py", "--help"], ["jobs/bench.py", "batch", "--help"]):
        done = subprocess.run([sys.executable, *script], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "Usage:" in done.stdout


def test_the_rayjob_runs_the_job_entry_point_on_a_gpu_worker_group():
    job = yaml.safe_load((REPO / "cluster" / "rayjob.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    words = shlex.split(job["spec"]["entrypoint"])
    assert words[0] == "python" and words[2] == "--config"
    for path in (words[1], words[3]):
        assert path.startswith(IMAGE_REPO) and (REPO / path.removeprefix(IMAGE_REPO)).is_file(), path
    assert words[1].endswith("jobs/answer.py")
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["rayVersion"] == RAY_PIN
    [gpu_group] = cluster["workerGroupSpecs"]
    [head] = cluster["headGroupSpec"]["template"]["spec"]["containers"]
    [worker] = gpu_group["template"]["spec"]["containers"]
    assert head["image"] == worker["image"] == IMAGE
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "1"
    settings = Settings.load(REPO / words[3].removeprefix(IMAGE_REPO))
    assert settings.batch.llm_actors <= gpu_group["maxReplicas"], "an LLM actor per GPU worker"


def test_the_cluster_launcher_config_is_valid_for_ray():
    config = yaml.safe_load((REPO / "cluster" / "ray-cluster.yaml").read_text())
    validate_config(prepare_config(config))  # Ray's own schema, after its defaults are filled in
    assert config["head_node_type"] in config["available_node_types"]
    assert config["docker"]["image"] == IMAGE
    dockerfile = (REPO / "cluster" / "Dockerfile").read_text()
    assert f"FROM rayproject/ray:{RAY_PIN}-" in dockerfile


def test_ray_is_pinned_once_and_installed_at_that_pin():
    assert ray.__version__ == RAY_PIN, "the environment's Ray differs from pyproject.toml's pin: reinstall"


def test_make_image_builds_the_tag_the_cluster_files_run():
    done = subprocess.run(["make", "-n", "image"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"-f cluster/Dockerfile -t {IMAGE} ." in done.stdout
    assert "--build-context data=" in done.stdout, "the image holds the example pool's data"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_no_config_caches_in_a_shared_temporary_folder(path: Path):
    cache_dir = Settings.load(path).cache_dir
    assert not cache_dir.is_relative_to("/tmp") and not cache_dir.is_relative_to("/var/tmp"), cache_dir


@pytest.mark.parametrize("spec", ["wikidata", "kif:wdqs", "sparql+wikidata:https://query.wikidata.org/sparql"])
def test_every_spec_of_wdqs_gets_its_limit(spec: str) -> None:
    settings = Settings(kb={"spec": spec})  # finding the host sends nothing: no contact needed
    limit = endpoint_limit(settings.batch, kb_routes(settings))
    assert limit == settings.batch.limits["query.wikidata.org"] and limit.per_second == 5.0


def test_the_local_base_has_no_endpoint_limit() -> None:
    settings = Settings(kb={"spec": "local"})
    assert endpoint_limit(settings.batch, kb_routes(settings)) is None


GPU_CONFIGS = [c for c in CONFIGS if "-vllm-" in c.name]


@pytest.mark.parametrize("path", GPU_CONFIGS, ids=lambda p: p.stem)
def test_a_gpu_config_names_where_each_thing_comes_from(path: Path) -> None:
    raw = yaml.safe_load(path.read_text())
    dockerfile = (REPO / "cluster" / "Dockerfile").read_text()
    assert raw["data_dir"] == "/home/ray/kifqa-data" and f"ENV KIFQA_DATA_DIR={raw['data_dir']}" in dockerfile, (
        "data_dir is the image's copy of the pool, never site-packages/../shared/data")
    for name in ("simplequestions-wikidata/train_answerable.txt", "wikidata/entity_labels_en.json",
                 "wikidata/properties_en.json"):
        assert name in dockerfile, name
    assert str(raw["batch"]["corpus"]).startswith("s3://") and str(raw["batch"]["out"]).startswith("s3://"), (
        "cluster nodes share no disk: corpus and output on object storage")


def test_the_image_installs_what_the_gpu_configs_need_from_one_list() -> None:
    dockerfile = (REPO / "cluster" / "Dockerfile").read_text()
    assert "pip install --no-cache-dir -r cluster/image-install.txt" in dockerfile
    [line] = [ln for ln in (REPO / "cluster" / "image-install.txt").read_text().splitlines()
              if ln.strip() and not ln.startswith("#")]
    extras = set(re.fullmatch(r"\.\[([\w,]+)\]", line.strip()).group(1).split(","))
    assert {"vllm", "embeddings"} <= extras


def test_the_rayjob_takes_secrets_from_kubernetes_and_keeps_the_dashboard_inside() -> None:
    job = yaml.safe_load((REPO / "cluster" / "rayjob.yaml").read_text())
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["authOptions"] == {"mode": "token"}
    assert cluster["headGroupSpec"].get("serviceType", "ClusterIP") == "ClusterIP"
    [head] = cluster["headGroupSpec"]["template"]["spec"]["containers"]
    [worker] = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    for container in (head, worker):
        [token] = [e for e in container["env"] if e["name"] == "HF_TOKEN"]
        assert "secretKeyRef" in token["valueFrom"]
    runtime_env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    assert not {"HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY"} & set(runtime_env.get("env_vars", {})), (
        "no secret in the runtime env: the dashboard and job info show it")
    assert "persistentVolumeClaim" not in str(job), "output is on object storage, not a shared volume"


def test_the_launcher_cluster_keeps_the_dashboard_on_the_head_and_mounts_the_hf_token() -> None:
    config = yaml.safe_load((REPO / "cluster" / "ray-cluster.yaml").read_text())
    [start] = [c for c in config["head_start_ray_commands"] if "ray start" in c]
    assert "--dashboard-host=127.0.0.1" in start and "0.0.0.0" not in start
    assert config["file_mounts"] == {"~/.cache/huggingface/token": "~/.cache/huggingface/token"}
    assert "/mnt/kifqa" not in str(config), "nothing mounts a shared disk: output goes to object storage"


def test_every_rayjob_pod_mounts_a_memory_backed_dev_shm() -> None:
    """Ray's object store lives in /dev/shm: a container's default 64 MiB makes Ray fall back to /tmp (slow)
    and vLLM's workers exchange tensors there."""
    cluster = yaml.safe_load((REPO / "cluster" / "rayjob.yaml").read_text())["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    for pod in pods:
        [container] = pod["containers"]
        memory = {v["name"] for v in pod.get("volumes", []) if v.get("emptyDir", {}).get("medium") == "Memory"}
        mounts = {m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == "/dev/shm"}
        assert mounts & memory, f"{container['name']} has no memory-backed /dev/shm"
