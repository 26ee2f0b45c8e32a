"""ONNX's own backend conformance suite (``onnx.backend.test.BackendTest``) against shapevm.

Every test of the installed onnx package runs: the node tests it generates, ``simple``,
``pytorch-converted``, ``pytorch-operator`` and the ``light`` models (the ``Real``
category, which compares with the outputs onnx ships). The tests of
``expected_failures.txt`` are marked as expected failures, each with its reason there; one
of them passing fails the suite, so the list stays exact. The CUDA variants are skipped
(the backend runs on the CPU).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.tools.tooling import require

require("onnx")

from tests.onnx_import import conformance  # noqa: E402  (after the check for onnx)

EXPECTED = conformance.read_list()
CASES = conformance.backend_test(EXPECTED).test_cases  # read once: each read re-marks
globals().update(CASES)


@pytest.fixture(autouse=True, scope="module")
def _onnx_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The light models write their inputs under ONNX_HOME: a temporary one, not ~/.onnx."""
    old = os.environ.get("ONNX_HOME")
    os.environ["ONNX_HOME"] = str(tmp_path_factory.mktemp("onnx_home"))
    yield
    if old is None:
        del os.environ["ONNX_HOME"]
    else:
        os.environ["ONNX_HOME"] = old


def test_listed_operators_pass_95_percent_of_their_tests_in_scope() -> None:
    """The target of docs/onnx.md: of each listed operator's node tests that are within
    shapevm's dtypes and values (not bfloat16/float8/strings, sequences, random numbers),
    at least 95% pass."""
    short = [
        (op, passed, scope)
        for op, _, passed, scope in conformance.operator_table(EXPECTED)
        if scope and passed < 0.95 * scope
    ]
    assert not short, f"operators under 95% of their in-scope node tests: {short}"


def test_every_expected_failure_exists_and_has_a_reason() -> None:
    known = {name for case in CASES.values() for name in vars(case) if name.startswith("test_")}
    for name, reason in EXPECTED.items():
        assert f"{name}_cpu" in known, f"{name} is not a test of the installed onnx"
        assert reason.strip(), name
