"""The runtime: entry binding, the interpreter, the op scheduler (kernel choice)."""

from typing import TYPE_CHECKING

from shapevm._lazy import lazy_names
from shapevm.runtime.binding import Binder, InputCountError, InputDTypeError
from shapevm.runtime.errors import UnsupportedKernelError

if TYPE_CHECKING:
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

# The interpreter and the kernel scheduler load on first use (see `shapevm._lazy`).
_SCHEDULER = (
    "KernelVariant",
    "choose_kernel",
    "dump_capability_db",
    "kernel_dtype",
    "load_capability_patch",
    "register_variant",
    "reset_capability_db",
)
_LAZY = {
    **dict.fromkeys(("Executable", "Plan", "RuntimeOpError"), "shapevm.runtime.interpreter"),
    **dict.fromkeys(_SCHEDULER, "shapevm.runtime.scheduler"),
}
__getattr__, __dir__ = lazy_names(__name__, _LAZY)

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
