"""The GPU suite: every test here needs CUDA (some NVML, some several GPUs); without them it skips, so CPU CI
is unchanged.

``make test-gpu`` sets OPENPOD_REQUIRE_GPU=1: on the device machine a missing GPU or NVML then stops the run
with an error instead of a suite of skips that reads as green. Tests that want more GPUs than the machine has
(``@pytest.mark.gpus(2)``) still skip. How to run it and where to record a run: docs/training.md, "GPU suite".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def nvml_problem() -> str | None:
    """Why NVML cannot be used here (None: it can)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return None
    except Exception as e:  # NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
        return f"NVML unavailable ({type(e).__name__}: {e})"


def pytest_collection_modifyitems(config, items):
    mine = [i for i in items if HERE in Path(str(i.fspath)).resolve().parents]
    if not mine:
        return
    gpus = cuda_devices()
    nvml = nvml_problem() if any(i.get_closest_marker("nvml") for i in mine) else None
    if os.environ.get("OPENPOD_REQUIRE_GPU") == "1":
        if gpus == 0 and not all(i.get_closest_marker("nvml") for i in mine):
            raise pytest.UsageError("OPENPOD_REQUIRE_GPU=1, but torch sees no CUDA device "
                                    "(torch.cuda.is_available() is False)")
        if nvml:
            raise pytest.UsageError(f"OPENPOD_REQUIRE_GPU=1, but {nvml}")
    for item in mine:
        item.add_marker(pytest.mark.gpu)
        nvml_only = item.get_closest_marker("nvml") is not None  # NVML needs the driver, not a CUDA torch
        want = item.get_closest_marker("gpus").args[0] if item.get_closest_marker("gpus") else int(not nvml_only)
        if gpus < want:
            item.add_marker(pytest.mark.skip(reason=f"needs {want} CUDA device(s), torch sees {gpus}"))
        elif nvml and item.get_closest_marker("nvml"):
            item.add_marker(pytest.mark.skip(reason=nvml))


from tests.training.conftest import bucket, moto_s3  # noqa: E402,F401  (the S3 tier's fixtures)
