"""symbolic_shape placeholders, symbolic_args_specs and ShapeDtypeStruct."""

from __future__ import annotations

import re

import numpy as np
import pytest

import shapevm as sv


def test_placeholders_with_like():
    assert sv.symbolic_shape("b, _, ...", like=(5, 6, 7))[1:] == (6, 7)
    assert sv.symbolic_shape(None, like=(2, 3)) == (2, 3)
    assert [str(d) for d in sv.symbolic_shape("(a, b)")] == ["a", "b"]
    assert len(sv.symbolic_shape("a,")) == 1 and sv.symbolic_shape("") == ()
    with pytest.raises(ValueError, match="no like= shape"):
        sv.symbolic_shape("b, _")
    with pytest.raises(ValueError, match="has 2 dimensions but the actual shape"):
        sv.symbolic_shape("b, _", like=(1, 2, 3))


def test_syntax_error_message():
    with pytest.raises(sv.shapes.SpecSyntaxError, match="unexpected character '@'"):
        sv.symbolic_shape("a, @")
    with pytest.raises(sv.shapes.SpecSyntaxError, match="expected a dimension expression"):
        sv.symbolic_shape("a +")


def test_symbolic_args_specs_guide():
    x = np.ones((3, 1), dtype=np.int32)
    y = np.ones((3, 4), dtype=np.int32)
    sx, sy = sv.symbolic_args_specs((x, y), "a, ...")
    assert str(sx.shape[0]) == "a" and sx.shape[1:] == (1,) and sy.shape[1:] == (4,)
    assert sx.shape[0] == sy.shape[0] and sx.dtype == np.int32


def test_symbolic_args_specs_prefix_trees():
    args = (np.ones((2, 3, 4)), np.ones(5))
    s0, s1 = sv.symbolic_args_specs(args, ("b, _, _", None))
    assert s0.shape[1:] == (3, 4) and s1.shape == (5,)
    nested = ({"p": np.ones((2, 3)), "q": np.ones((2, 7))}, np.ones(2))
    out = sv.symbolic_args_specs(nested, ("batch, ...", "batch"))
    assert out[0]["p"].shape[0] == out[1].shape[0] == out[0]["q"].shape[0]
    assert sv.symbolic_args_specs(args, None)[0].shape == (2, 3, 4)
    with pytest.raises(ValueError, match="prefix of the argument tree"):
        sv.symbolic_args_specs(args, ("b, ...",))


def test_symbolic_args_specs_constraints_shared_scope():
    args = (np.ones((2, 3)), np.ones(3))
    s0, s1 = sv.symbolic_args_specs(args, ("a, b", "b"), constraints=["a >= 2"])
    assert s0.shape[0] >= 2 and s0.scope is s1.scope


def test_shape_dtype_struct():
    (b,) = sv.symbolic_shape("b")
    s = sv.ShapeDtypeStruct((b, 256), np.float32)
    assert repr(s) == "ShapeDtypeStruct(shape=(b, 256), dtype=float32)"
    assert s == sv.ShapeDtypeStruct((b, 256), "float32") and s.ndim == 2
    with pytest.raises(TypeError, match="must be an int or a symbolic dimension"):
        sv.ShapeDtypeStruct((1.5,), np.float32)


def test_like_placeholder_message_names_the_dimension():
    with pytest.raises(ValueError, match=r"like\[0\] is None"):
        sv.symbolic_shape("_, b", like=(None, 3))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("a, 4", "gives dimension 1 the size 4, but the actual shape (2, 3) has 3 there"),
        ("a, b, c", "has 3 dimensions but the actual shape (2, 3) has 2"),
        ("a", "has 1 dimensions but the actual shape (2, 3) has 2"),
    ],
)
def test_specs_are_checked_against_the_argument(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        sv.symbolic_args_specs((np.ones((2, 3)),), spec)
    with pytest.raises(ValueError, match=re.escape(message)):
        sv.symbolic_shape(spec, like=(2, 3))
    assert sv.symbolic_args_specs((np.ones((2, 3)),), "a, 3")[0].shape[1] == 3


def test_min_max_gives_the_operation_and_its_arguments_of_a_bare_min_or_max() -> None:
    a, b = sv.symbolic_shape("a, b")
    assert sv.min_dim(64, a).min_max() == ("min", 64, a)
    assert sv.max_dim(a, b).min_max() == ("max", a, b)
    for not_bare in (sv.min_dim(a, b) + 1, 2 * sv.max_dim(a, b), a, a * b):
        assert not_bare.min_max() is None
