"""A benchmark plugin for the harness tests, loaded through ``SHAPEVM_BENCH_PLUGINS``: a
system whose build fails, saying whether its ``setup_env`` reached the measuring process."""

from __future__ import annotations

import os
from collections.abc import MutableMapping

import numpy as np

from shapevm.tools.bench import register_system

MARK = "SHAPEVM_BENCH_TEST_MARK"


def _setup(env: MutableMapping[str, str]) -> None:
    env[MARK] = "yes"


def _build_broken(workload_id: str, weights: dict[str, np.ndarray]) -> None:
    cold = os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(os.environ["TMPDIR"])
    facts = f"setup_env ran: {os.environ.get(MARK)}, private caches: {cold}"
    raise RuntimeError(f"cannot build {workload_id} ({facts})")


register_system("plugin-broken", lambda: True, _build_broken, _setup, replace=True)  # type: ignore[arg-type]
