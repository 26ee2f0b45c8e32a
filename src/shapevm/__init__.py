"""shapevm: a virtual machine for tensor programs whose shapes change at run time."""

__version__ = "0.1.0"
