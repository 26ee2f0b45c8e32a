"""``shapevm.vm``: looking inside the virtual machine.

- `scd_analysis` / `print_scd_analysis`: the Shape Convergence Degree of every tensor of a
  function, and where each unknown (data-dependent) dimension comes from;
- `dump_capability_db` / `load_capability_patch`: the kernel variants each device has.
"""

from __future__ import annotations

import os
from typing import Any, TextIO

from shapevm.frontend.export import Exported, export
from shapevm.frontend.jit import Jitted
from shapevm.runtime import scheduler as _scheduler
from shapevm.runtime.interpreter import invalidate_plans
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


def dump_capability_db(file: TextIO | None = None) -> dict[str, Any]:
    """Print which kernel variants each device has for each op and dtype; returns it as a
    JSON-able dict (``{device: {op: {variant: [dtypes]}}}``)."""
    return _scheduler.dump_capability_db(file)


def load_capability_patch(path: str | os.PathLike[str] | dict[str, Any]) -> dict[str, Any]:
    """Amend the capability table from a JSON file (``{"cpu": {"conv2d": {"direct":
    null}}}`` removes a variant, a list of dtype names sets its dtypes); every function
    chooses its kernels again on its next call."""
    db = _scheduler.load_capability_patch(path)
    invalidate_plans()
    return db


def reset_capability_db() -> None:
    """Back to the variants as registered (undo every patch)."""
    _scheduler.reset_capability_db()
    invalidate_plans()


__all__ = [
    "SCDReport",
    "dump_capability_db",
    "load_capability_patch",
    "print_scd_analysis",
    "reset_capability_db",
    "scd_analysis",
]
