"""The preflight's version checks, on the inputs a GPU node gives (no GPU here): the installed vLLM against
the supported range, and the NVIDIA driver /proc/driver/nvidia/version names, against CUDA 13's minimum."""

from __future__ import annotations

import pytest

from kifqa.batch.preflight import MIN_NVIDIA_DRIVER, nvidia_driver, vllm_version
from kifqa.llm.vllm_engine import VLLM_SUPPORTED

#: /proc/driver/nvidia/version as the 580 and 550 drivers write it.
DRIVER_580 = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  "
              "(dvs-builder@U16-I3-B03-4-3)  Tue Jul 29 23:31:36 UTC 2025\nGCC version:  gcc version 12.3.0\n")
DRIVER_550 = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\n"
              "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


@pytest.mark.parametrize("version", ["0.11.0", "0.20.1", "0.33.0", "0.33.2rc1"])
def test_a_supported_vllm_passes(version: str) -> None:
    assert vllm_version(version) == []


@pytest.mark.parametrize("version", ["0.10.2", "0.9.1", "0.34.0", "1.0.0"])
def test_an_unsupported_vllm_is_one_problem_saying_what_to_install(version: str) -> None:
    assert [str(p) for p in vllm_version(version)] == [
        f"extras: vLLM {version} is installed, but the vllm backend needs vllm{VLLM_SUPPORTED}: "
        "pip install 'kifqa[vllm]'"]


def test_the_driver_cuda_13_needs() -> None:
    assert MIN_NVIDIA_DRIVER == 580
    assert nvidia_driver(DRIVER_580) == []
    assert [str(p) for p in nvidia_driver(DRIVER_550)] == [
        "gpu_driver: the NVIDIA driver 550.127.05 is older than 580, which the CUDA 13 build of torch that vLLM "
        "installs needs: update the nodes' NVIDIA driver to 580 or later"]


def test_no_driver_or_an_unknown_format_is_left_to_cuda() -> None:
    assert nvidia_driver(None) == [] and nvidia_driver("something else\n") == []
