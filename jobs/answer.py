"""Ray Job entry point of the batch job: the same command as ``kifqa run``.

    ray job submit --working-dir . -- python jobs/answer.py --config jobs/configs/local-cpu.yaml

The corpus and the output folder come from the config's ``batch`` section unless given here
(``python jobs/answer.py CORPUS --out DIR --config ...``). Inside ``ray job submit`` the job joins the
cluster it was submitted to (``RAY_ADDRESS``).
"""

from __future__ import annotations

from kifqa.cli.run import run
from kifqa.redact import mask_stdio

if __name__ == "__main__":
    mask_stdio()
    run(prog_name="jobs/answer.py")
