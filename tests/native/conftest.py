"""Fixtures of the C kernel library's tests: every test that takes ``isa`` runs once per
instruction-set level this machine supports (the library itself picks the best one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shapevm import native

LEVELS = native.isa_levels()


@pytest.fixture(params=LEVELS)
def isa(request: pytest.FixtureRequest) -> Iterator[str]:
    """Switch the library to one level for the test, then back."""
    before = native.info()["isa"]
    native.set_isa(request.param)
    try:
        yield request.param
    finally:
        native.set_isa(before)
