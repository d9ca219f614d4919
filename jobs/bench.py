"""Benchmarks as a script: ``python jobs/bench.py batch`` is ``kifqa bench batch``."""

from __future__ import annotations

from kifqa.bench import bench

if __name__ == "__main__":
    bench(prog_name="jobs/bench.py")
