"""The runtime: entry binding, the interpreter, the op scheduler."""

from shapevm.runtime.binding import Binder, InputCountError, InputDTypeError
from shapevm.runtime.interpreter import Executable, Plan, RuntimeOpError

__all__ = ["Binder", "Executable", "InputCountError", "InputDTypeError", "Plan", "RuntimeOpError"]
