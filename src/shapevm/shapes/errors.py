"""Exceptions of the symbolic shape engine."""

from __future__ import annotations


class InconclusiveDimensionOperation(Exception):
    """A comparison or conversion of symbolic dimensions cannot be decided.

    Raised when ``>=``, ``>``, ``<=``, ``<`` (or ``int()``) on a symbolic dimension has no
    answer that holds for every value of the dimension variables allowed by the scope's
    constraints. The message quotes the operation, lists the constraints in force and says
    how to fix it.
    """


class ShapeError(ValueError):
    """Concrete shapes do not match a symbolic shape specification."""


class UnsatisfiableConstraintsError(ValueError):
    """The constraints of a scope admit no value of the dimension variables."""


class ScopeMixError(ValueError):
    """Symbolic expressions from different scopes were combined."""
