"""Regions: maximal shape-stable runs, and the reasons the other spans stay interpreted."""

from __future__ import annotations

import io

import numpy as np

import shapevm as sv
import shapevm.numpy as snp
import shapevm.vm as vm
from shapevm.bytecode import parse_program
from shapevm.jit import find_regions
from tests.bytecode.programs import CONTROL, MEMORY, MLP


def regions_of(text: str):
    program = parse_program(text)
    return find_regions(program.functions[0], program)


def test_straight_line_function_is_one_region():
    report = regions_of(MLP)
    (r,) = report.regions
    assert (r.compilable, r.start, r.stop, r.n_ops, r.name) == (True, 0, 3, 2, "R0")
    assert r.scd == 1.0 and report.scd == 1.0


def test_alloc_resize_and_free_stay_inside_a_region():
    (r,) = regions_of(MEMORY).regions
    assert r.compilable and (r.start, r.stop) == (0, 11)


def test_data_dependent_ops_phis_and_branches_split_regions_with_reasons():
    report = regions_of(CONTROL)
    spans = [(r.span, r.block, r.name, r.reason) for r in report.regions]
    assert spans == [
        ("#2", "L0", "--", "nonzero is data-dependent (its output shape depends on values)"),
        ("#3", "L0", "--", "control flow (BRANCH_IF)"),
        ("#4", "L1", "R0", ""),
        ("#6", "L2", "R1", ""),
        ("#7", "L2", "--", "control flow (BRANCH_IF)"),
        ("#8", "L4", "R2", ""),
        ("#10", "L3", "--", "TENSOR_PHI merges the values of branches"),
    ]
    assert [r.scd for r in report.regions if not r.compilable] == [0.5, 1.0, 1.0, 0.5]
    assert round(report.scd, 2) == 0.83


def test_an_op_reading_a_dynamic_tensor_is_interpreted():
    def f(x):
        idx = snp.argwhere(x > 0.0)
        return snp.sum(idx), x * 2.0 + 1.0

    (b,) = sv.symbolic_shape("b")
    report = vm.region_analysis(f, sv.ShapeDtypeStruct((b, 3), np.float32))
    reasons = [r.reason for r in report.regions]
    assert "nonzero is data-dependent (its output shape depends on values)" in reasons
    assert any("has a dynamic dimension" in r and "dynamic, 2" in r for r in reasons)
    compiled = [r for r in report.regions if r.compilable]
    assert sum(r.n_ops for r in compiled) == 3  # greater, mul, add


def test_print_scd_analysis_has_a_regions_section():
    def f(x):
        return snp.sum(snp.argwhere(x > 0.0)), snp.tanh(x)

    (b,) = sv.symbolic_shape("b")
    out = io.StringIO()
    vm.print_scd_analysis(f, sv.ShapeDtypeStruct((b, 3), np.float32), file=out)
    text = out.getvalue()
    assert "function SCD: 0.88" in text
    assert "regions of @f (function SCD 0.88 >= 0.80: compiled after 3 calls" in text
    assert "interpreted: nonzero is data-dependent" in text
    assert "compilable" in text
    out = io.StringIO()
    vm.print_scd_analysis(f, sv.ShapeDtypeStruct((b, 3), np.float32), file=out, scd_threshold=0.9)
    assert "function SCD 0.88 < scd_threshold 0.90: nothing is compiled" in out.getvalue()
    assert "not compiled: function SCD 0.88 < 0.90" in out.getvalue()


def test_print_scd_analysis_uses_the_thresholds_of_a_jitted_function():
    f = sv.jit(lambda x: x * 2.0, hot_threshold=7, scd_threshold=0.5)
    out = io.StringIO()
    vm.print_scd_analysis(f, np.ones((2, 2), np.float32), file=out)
    assert "function SCD 1.00 >= 0.50: compiled after 7 calls" in out.getvalue()
