"""Run by tests/integration/test_image.py with the Python of the image's environment: starts a
``ray.cluster_utils.Cluster`` whose worker node declares GPUs, then runs ``kifqa check`` and the Ray Job
entry point (``jobs/answer.py``) on each config named, as the image's nodes would. Prints one JSON line per
command: its config, exit status and output tail. Each config writes to its own folder under
``KIFQA_BATCH__OUT``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ray.cluster_utils import Cluster

REPO = Path(__file__).resolve().parents[2]


def main(configs: list[str]) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 0, "include_dashboard": False})
    cluster.add_node(num_cpus=16, num_gpus=4)  # a GPU worker: 4 LLM actors of 4 CPUs and 1 GPU
    env = os.environ | {"RAY_ADDRESS": cluster.address}
    bin_dir = Path(sys.executable).parent
    try:
        for config in configs:
            env["KIFQA_BATCH__OUT"] = str(Path(os.environ["KIFQA_BATCH__OUT"]) / Path(config).stem)
            for name, command in (("check", [str(bin_dir / "kifqa"), "check", "--config", config]),
                                  ("job", [sys.executable, "jobs/answer.py", "--config", config, "--no-progress"])):
                done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
                print(json.dumps({"config": config, "command": name, "status": done.returncode,
                                  "stdout": done.stdout[-3000:], "stderr": done.stderr[-3000:]}), flush=True)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
