"""shapevm: a virtual machine for tensor programs whose shapes change at run time."""

__version__ = "0.1.0"

# Bytecode errors (shapevm.bytecode).
from shapevm.bytecode.errors import BytecodeFormatError as BytecodeFormatError
from shapevm.bytecode.errors import VerifyError as VerifyError
