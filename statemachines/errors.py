"""The one exception family of the project.

Every error the framework raises on purpose derives from :class:`StateMachinesError`,
and also from the built-in it is, so callers may catch either.

- :class:`DefinitionError` (a ``TypeError``): a machine class is declared wrongly.
  Raised when the class is created, never later.
- :class:`InvalidArgument` (a ``ValueError``): a call got a value it cannot use.
- :class:`MachineError` (a ``RuntimeError``): a machine broke a rule of the runtime
  while running (for example, a deadline that does not move forward).
- :class:`MissingDependency` (an ``ImportError``): an optional package a feature
  needs is not installed; the message names the ``pip install`` that adds it.
"""

from __future__ import annotations

__all__ = [
    "DefinitionError",
    "InvalidArgument",
    "MachineError",
    "MissingDependency",
    "StateMachinesError",
]


class StateMachinesError(Exception):
    """Base class of every error raised on purpose by this project."""


class DefinitionError(StateMachinesError, TypeError):
    """A machine class is declared wrongly; raised when the class is created."""


class InvalidArgument(StateMachinesError, ValueError):
    """A function or method was called with a value it cannot use."""


class MachineError(StateMachinesError, RuntimeError):
    """A machine broke a rule of the runtime while it ran."""


class MissingDependency(StateMachinesError, ImportError):
    """An optional package is not installed; the message says how to install it."""
