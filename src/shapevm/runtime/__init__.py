"""The runtime: the op scheduler picks a kernel variant per op call."""

from shapevm.runtime.errors import UnsupportedKernelError
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
    "KernelVariant",
    "UnsupportedKernelError",
    "choose_kernel",
    "dump_capability_db",
    "kernel_dtype",
    "load_capability_patch",
    "register_variant",
    "reset_capability_db",
]
