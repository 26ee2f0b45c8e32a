"""The interpreter asks the scheduler for kernels; a missing kernel is a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
import shapevm.vm as vm
from shapevm import nn
from shapevm.runtime import UnsupportedKernelError


@pytest.fixture(autouse=True)
def _reset() -> object:
    yield
    vm.reset_capability_db()


def test_missing_kernel_names_op_dtype_and_device(tmp_path: Path) -> None:
    f = sv.jit(lambda x: snp.exp(x) + 1.0, shapes="b")
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(f(x), np.e + 1, rtol=1e-6)
    patch = tmp_path / "patch.json"
    patch.write_text(json.dumps({"cpu": {"exp": None}}))
    vm.load_capability_patch(patch)
    with pytest.raises(UnsupportedKernelError) as info:
        f(x)
    text = str(info.value)
    assert "exp" in text and "f32" in text and "cpu" in text
    vm.reset_capability_db()
    np.testing.assert_allclose(f(x), np.e + 1, rtol=1e-6)


def test_conv_variants_agree_whatever_the_db_allows() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    w1 = rng.standard_normal((8, 4, 1, 1)).astype(np.float32)
    f = sv.jit(lambda x: (nn.conv2d(x, w, padding=1), nn.conv2d(x, w1)), shapes="b, 4, h, w")
    x = rng.standard_normal((2, 4, 9, 7)).astype(np.float32)
    base = f(x)
    db = vm.dump_capability_db(file=open("/dev/null", "w"))
    for name in db["cpu"]["conv2d"]:
        if name == "reference":
            continue
        vm.load_capability_patch({"cpu": {"conv2d": {name: None}}})
        for got, want in zip(f(x), base, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        vm.reset_capability_db()


def test_layout_ops_run_as_one_method_call_and_agree_with_numpy() -> None:
    # OpInfo.view: reshape, transpose and slice skip the generic kernel call.
    def f(x):
        b, n = x.shape
        y = snp.transpose(x.reshape(b, n // 2, 2), (1, 0, 2))
        return y[:, 1:], x.T

    exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct(sv.symbolic_shape("b, 4"), np.float32))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y, t = exp.call(x)
    np.testing.assert_array_equal(y, np.transpose(x.reshape(3, 2, 2), (1, 0, 2))[:, 1:])
    np.testing.assert_array_equal(t, x.T)
    plan = exp.executable.plan_for({"b": 3})
    names = [s.__name__ for block in plan.blocks.values() for s in block.steps]
    assert names.count("layout") == 4, names
