"""Golden-file comparison; ``SHAPEVM_REGEN_GOLDEN=1`` rewrites the files instead."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SHAPEVM_REGEN_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"missing golden file {path}; run with SHAPEVM_REGEN_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{name} differs from its golden file (SHAPEVM_REGEN_GOLDEN=1)"
