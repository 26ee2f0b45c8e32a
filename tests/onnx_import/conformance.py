"""ONNX's backend conformance suite against shapevm: the expected failures and their reasons.

`EXPECTED_FAILURES` (read from ``expected_failures.txt``) names every test of
``onnx.backend.test.BackendTest`` that shapevm does not pass, one per line with the reason.
The test module marks exactly those as expected failures: a test on the list that starts
to pass fails the suite (unexpected success), so the list cannot hide a passing test.

Regenerate the list and the tables of ``docs/onnx.md`` after changing the importer or
upgrading onnx (runs the whole suite, about a minute)::

    python -m tests.onnx_import.conformance --write
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
LIST = HERE / "expected_failures.txt"
# The operators the importer is held to (>= 95% of their node tests, in docs/onnx.md).
LISTED = """
Add Sub Mul Div Pow Mod Neg Abs Exp Log Sqrt Reciprocal Sin Cos Tan Asin Acos Atan Sinh
Cosh Asinh Acosh Atanh Floor Ceil Round Sign Erf Max Min Sum Mean IsNaN IsInf Equal Less
Greater LessOrEqual GreaterOrEqual Not And Or Xor Relu LeakyRelu PRelu Elu Selu Celu Gelu
HardSigmoid HardSwish Mish Softplus Softsign Sigmoid Tanh ThresholdedRelu Clip Shrink Swish
MatMul Gemm Einsum Conv ConvTranspose MaxPool AveragePool GlobalAveragePool GlobalMaxPool
LpPool BatchNormalization InstanceNormalization LayerNormalization GroupNormalization Softmax
LogSoftmax ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2
ReduceLogSum ReduceLogSumExp ReduceSumSquare ArgMax ArgMin TopK Cast CastLike Reshape Flatten
Transpose Squeeze Unsqueeze Concat Split Slice Gather GatherElements GatherND ScatterND Expand
Tile Pad Shape Size Range ConstantOfShape Constant Identity Dropout Where Trilu CumSum NonZero
OneHot DepthToSpace Resize If
""".split()
# Reasons that put a test outside what shapevm computes at all (not a gap in an operator).
OUT_OF_SCOPE = ("element type", "sequence", "optional", "random numbers")


def read_list(path: Path = LIST) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, reason = line.split("\t", 1)
            out[name] = reason
    return out


def backend_test(expected: dict[str, str] | None = None) -> Any:
    """The ``BackendTest`` of shapevm, with ``expected`` marked as expected failures."""
    from onnx.backend.test import BackendTest

    import shapevm.onnx.backend as backend

    suite = BackendTest(backend, __name__)
    for name in expected or {}:
        suite.xfail(f"^{re.escape(name)}_cpu$")
    return suite


def reason_of(text: str) -> str:
    """A one-line reason from a failure's traceback text."""
    patterns = [
        (r"found:\s+(BFLOAT16|STRING|FLOAT8\w*|U?INT4|U?INT2|FLOAT4\w*|FLOAT8E8M0)",
         "element type {0} is outside shapevm's dtypes"),
        (r"cast to (\w+) is not supported", "element type {0} is outside shapevm's dtypes"),
        (r"a value of (sequence|optional|map)_type", "{0} values are not supported"),
        (r"unsupported operator (\w+)", "operator {0} is not supported"),
        (r"operator (\w+) of domain '([\w.]+)'", "operator {0} of domain {1}"),
        (r"Dropout in training mode", "Dropout in training mode draws random numbers"),
        (r"Mismatched elements", "values differ beyond the tolerance"),
        (r"no node computes it|does not compute", "onnx builds no function body for these "
         "inputs, and the operator has no converter"),
        (r"only known when the program runs",
         "a size or axis inside the operator's function body comes from input values"),
    ]  # fmt: skip
    for pattern, template in patterns:
        m = re.search(pattern, text)
        if m:
            return template.format(*m.groups())
    last = [line for line in text.strip().splitlines() if line.strip()][-1]
    return last.strip()[:160]


def operators() -> dict[str, str]:
    """The operator each node test is about: its node's op type, or for an ``_expanded``
    test (the operator's function body) the operator it expands."""
    from onnx.backend.test.loader import load_model_tests

    tests = {t.name: t for t in load_model_tests(kind="node")}
    out = {}
    for name, t in tests.items():
        ops = {n.op_type for n in t.model.graph.node}
        base = re.sub(r"_expanded(_ver\d+)?$", "", name)
        if len(ops) != 1 and base in tests:
            ops = {n.op_type for n in tests[base].model.graph.node}
        out[name] = ops.pop() if len(ops) == 1 else "?"
    return out


def in_scope(reason: str) -> bool:
    """Whether a failure is a gap of shapevm's operators, not something outside what it
    computes at all (an element type, a sequence, random numbers)."""
    return not any(word in reason for word in OUT_OF_SCOPE)


def operator_table(expected: dict[str, str]) -> list[tuple[str, int, int, int]]:
    """Per listed operator: node tests, passed, and passed of those in scope."""
    of = operators()
    rows = []
    for op in LISTED:
        names = [n for n, o in of.items() if o == op]
        passed = [n for n in names if n not in expected]
        scope = [n for n in names if n not in expected or in_scope(expected[n])]
        rows.append((op, len(names), len(passed), len(scope)))
    return rows


_F16_REASON = (
    "float16 computed in float32 node by node rounds differently than the reference's "
    "float16 arithmetic, just beyond rtol 1e-3"
)


def run_all() -> tuple[dict[str, str], collections.Counter[str], collections.Counter[str]]:
    """Run every CPU test; the failures with reasons, and passes and totals per category."""
    with tempfile.TemporaryDirectory() as home:
        os.environ["ONNX_HOME"] = home
        suite = backend_test().include(r"_cpu$").test_cases
        failures: dict[str, str] = {}
        passed: collections.Counter[str] = collections.Counter()
        total: collections.Counter[str] = collections.Counter()
        for case_name, case in suite.items():
            category = case_name.replace("OnnxBackend", "").replace("ModelTest", "")
            tests = unittest.defaultTestLoader.loadTestsFromTestCase(case)
            names = [t.id().split(".")[-1] for t in tests]
            result = unittest.TestResult()
            tests.run(result)
            bad = {t.id().split(".")[-1]: tb for t, tb in (*result.failures, *result.errors)}
            skipped = {t.id().split(".")[-1] for t, _ in result.skipped}
            for name in names:
                if name in skipped:
                    continue
                total[category] += 1
                if name in bad:
                    reason = reason_of(bad[name])
                    if "fp16" in name and reason.startswith("values differ"):
                        reason = _F16_REASON
                    failures[name.removesuffix("_cpu")] = reason
                else:
                    passed[category] += 1
    return failures, passed, total


DOC = HERE.parents[1] / "docs" / "onnx.md"
START, END = "<!-- conformance:start -->", "<!-- conformance:end -->"
_NAMES = {"Node": "node", "Simple": "simple", "PyTorchConverted": "pytorch-converted",
          "PyTorchOperator": "pytorch-operator", "Real": "light (the `Real` category)"}  # fmt: skip


def tables(failures: dict[str, str], passed: dict[str, int], total: dict[str, int]) -> str:
    """The conformance section of docs/onnx.md."""
    out = ["| category | tests | passed | expected failures |", "|---|---|---|---|"]
    for key, name in _NAMES.items():
        out.append(f"| {name} | {total.get(key, 0)} | {passed.get(key, 0)} | "
                   f"{total.get(key, 0) - passed.get(key, 0)} |")  # fmt: skip
    out += ["", "The operators shapevm is held to (their node tests, `_expanded` variants "
            "included; *in scope* leaves out tests of element types shapevm does not have, "
            "sequences, optionals and random numbers):", "",
            "| operator | node tests | passed | in scope | passed in scope |",
            "|---|---|---|---|---|"]  # fmt: skip
    for op, n, ok, scope in operator_table(failures):
        out.append(f"| {op} | {n} | {ok} | {scope} | {ok / scope:.0%} |" if scope else
                   f"| {op} | {n} | {ok} | 0 | — |")  # fmt: skip
    by_reason: dict[str, list[str]] = collections.defaultdict(list)
    for name, reason in sorted(failures.items()):
        by_reason[reason].append(name)
    out += ["", f"The {len(failures)} expected failures, by reason "
            "(`tests/onnx_import/expected_failures.txt`):", "",
            "| reason | tests |", "|---|---|"]  # fmt: skip
    for reason, names in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(
            f"| {reason} ({len(names)}) | {', '.join(n.removeprefix('test_') for n in names)} |"
        )
    return "\n".join(out)


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def write(failures: dict[str, str]) -> None:
    lines = ["# shapevm vs onnx.backend.test: tests expected to fail, and why (tab separated)"]
    lines += [f"{name}\t{reason}" for name, reason in sorted(failures.items())]
    LIST.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    failed, ok, all_ = run_all()
    if "--write" in sys.argv:
        write(failed)
        write_doc(tables(failed, ok, all_))
    json.dump({"passed": ok, "total": all_}, sys.stdout, indent=1)
    print()
