"""External tools some tests need (a browser, node): skip without them, except in CI.

``.ci/run`` installs them and sets ``SHAPEVM_REQUIRE_TOOLS=1``, which turns a missing
tool into a failure, so that CI never passes by skipping these tests.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

REQUIRED = os.environ.get("SHAPEVM_REQUIRE_TOOLS") == "1"
CHROMIUM = os.environ.get("SHAPEVM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = os.environ.get("SHAPEVM_SCREENSHOTS")
"""A folder (``docs``): the tests that take screenshots for the docs write them there."""


def need(ok: bool, reason: str) -> None:
    """Skip with ``reason`` unless ``ok``; fail instead when tools are required."""
    if ok:
        return
    if REQUIRED:
        pytest.fail(f"{reason} (SHAPEVM_REQUIRE_TOOLS=1: .ci/run installs it)")
    pytest.skip(reason)


def require(module: str) -> Any:
    """``module``, imported; the test (or test module) is skipped without it, except in CI
    (``SHAPEVM_REQUIRE_TOOLS=1``: the ``test`` extra installs it), where that fails."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = f"{module} is not installed: pip install -e '.[test]' ({exc})"
        if REQUIRED:
            pytest.fail(f"{reason} (SHAPEVM_REQUIRE_TOOLS=1)", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def screenshot_path(name: str) -> Path | None:
    """Where to save the screenshot ``name``, or ``None`` when none is asked for."""
    if not SCREENSHOTS:
        return None
    folder = Path(SCREENSHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def playwright_api():  # type: ignore[no-untyped-def]
    """``playwright.sync_api``, or a skip (a failure in CI) when it is not installed."""
    try:
        import playwright.sync_api as api
    except ImportError:
        need(False, "the Python package playwright is not installed (pip install playwright)")
    return api


def chromium(playwright):  # type: ignore[no-untyped-def]
    """Debian's Chromium, headless, driven by Playwright (never a downloaded browser)."""
    need(Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
