"""The runtime: entry binding, the interpreter, the op scheduler (kernel choice)."""

from shapevm.runtime.binding import Binder, InputCountError, InputDTypeError
from shapevm.runtime.errors import UnsupportedKernelError
from shapevm.runtime.interpreter import Executable, Plan, RuntimeOpError
from shapevm.runtime.scheduler import (
    KernelVariant,
    choose_kernel,
    dump_capability_db,
    kernel_dtype,
    load_capability_patch,
    register_variant,
    reset_capability_db,
)

__all__ = [
    "Binder",
    "Executable",
    "InputCountError",
    "InputDTypeError",
    "KernelVariant",
    "Plan",
    "RuntimeOpError",
    "UnsupportedKernelError",
    "choose_kernel",
    "dump_capability_db",
    "kernel_dtype",
    "load_capability_patch",
    "register_variant",
    "reset_capability_db",
]
