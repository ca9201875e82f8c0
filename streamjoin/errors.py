"""The project's exception hierarchy: one base, a few subclasses a caller can catch."""

from __future__ import annotations

__all__ = ["StreamJoinError", "ValidationError", "UnsupportedPlanError", "StateError", "SinkError"]


class StreamJoinError(Exception):
    """Base of every error the engine raises on purpose."""


class ValidationError(StreamJoinError):
    """Invalid SQL or invalid operator arguments, found before anything runs."""


class UnsupportedPlanError(StreamJoinError):
    """Valid SQL whose plan the engine cannot run with Flink's semantics."""


class StateError(StreamJoinError):
    """Operator state is inconsistent with the input (e.g. a retraction of an unknown row)."""


class SinkError(StreamJoinError):
    """The sink cannot take the changes it is given."""
