"""``shapevm.vm``: looking inside the virtual machine.

- `scd_analysis` / `print_scd_analysis`: the Shape Convergence Degree of every tensor of a
  function, and where each unknown (data-dependent) dimension comes from;
- `dump_capability_db` / `load_capability_patch`: the kernel variants each device has.
"""

from __future__ import annotations

from typing import Any, TextIO

from shapevm.frontend.export import Exported, export
from shapevm.frontend.jit import Jitted
from shapevm.runtime.scd import SCDReport, analyze, print_report


def _exported(fun_or_exported: Any, specs: tuple[Any, ...]) -> Exported:
    if isinstance(fun_or_exported, Exported):
        if specs:
            raise TypeError("print_scd_analysis of an Exported takes no specifications")
        return fun_or_exported
    if not specs:
        raise TypeError(
            "print_scd_analysis(fun, *specs) needs the argument specifications of fun "
            "(ShapeDtypeStruct or arrays), as export does"
        )
    jitted = fun_or_exported if isinstance(fun_or_exported, Jitted) else Jitted(fun_or_exported)
    return export(jitted)(*specs)


def scd_analysis(fun_or_exported: Any, *specs: Any) -> SCDReport:
    """The SCD report of an `Exported`, or of a function traced for ``specs``."""
    exp = _exported(fun_or_exported, specs)
    return analyze(exp.program.functions[0])


def print_scd_analysis(fun_or_exported: Any, *specs: Any, file: TextIO | None = None) -> None:
    """Print the SCD of every tensor and where its unknown dimensions come from.

    >>> import numpy as np, shapevm as sv, shapevm.numpy as snp, shapevm.vm as vm
    >>> b, = sv.symbolic_shape("b")
    >>> vm.print_scd_analysis(lambda x: x * 2.0, sv.ShapeDtypeStruct((b, 4), np.float32))
    SCD analysis of @fun (entry dimension variables: b)
      reg   type                           SCD  unknown dimensions come from
      t0    f32[b, 4]                     1.00
      t1    f32[b, 4]                     1.00
    function SCD: 1.00 (4 of 4 dimensions known at entry)
    """
    print_report(scd_analysis(fun_or_exported, *specs), file)


__all__ = ["SCDReport", "print_scd_analysis", "scd_analysis"]
