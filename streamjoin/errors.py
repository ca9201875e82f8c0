"""The project's exception hierarchy: one base, one subclass per kind of failure a caller can catch.

::

    StreamJoinError
    ├── ValidationError (also ValueError)    invalid SQL or invalid arguments, found before anything runs
    ├── UnsupportedPlanError                 valid SQL the engine cannot run with Flink's semantics
    ├── ChangelogError (also ValueError)     a malformed changelog (a retraction of a row never added, a bad RowKind)
    ├── StateError                           operator state inconsistent with its input
    │   └── IncompatibleStateError           a checkpoint's state the query cannot read (SQL, engine or version changed)
    ├── SinkError                            a sink that cannot take the changes it is given (plan or Delta write)
    ├── EngineError                          the jvm engine cannot run: its jar is missing or built for another Spark
    └── ConnectorError                       an external system a connector talks to failed
        ├── EmbeddedKafkaError               the embedded broker cannot be set up, did not start, or died
        ├── TopicRecreatedError              a topic was deleted and created again under a checkpoint
        └── ConnectorTimeoutError (also TimeoutError)  a wait on a Kafka cluster ran out

The classes that replace a builtin (``ValueError``, ``TimeoutError``) also subclass it, so
code that catches the builtin keeps working. The ``streamjoin`` command maps each class to
an exit status (:mod:`streamjoin.cli`, ``docs/cli.md``).
"""

from __future__ import annotations

__all__ = [
    "ChangelogAssertionError",
    "ChangelogError",
    "ConnectorError",
    "ConnectorTimeoutError",
    "EmbeddedKafkaError",
    "EngineError",
    "IncompatibleStateError",
    "SinkError",
    "StateError",
    "StreamJoinError",
    "TopicRecreatedError",
    "UnsupportedPlanError",
    "ValidationError",
]


class StreamJoinError(Exception):
    """Base of every error the engine raises on purpose."""


class ValidationError(StreamJoinError, ValueError):
    """Invalid SQL (the message names ``file:line:col`` and the rule) or invalid arguments of an
    operator, connector or generator, found before anything runs."""


class UnsupportedPlanError(StreamJoinError):
    """Valid SQL whose plan the engine cannot run with Flink's semantics."""


class ChangelogError(StreamJoinError, ValueError):
    """A changelog that cannot be materialised or encoded, e.g. it retracts a row never added,
    carries an unknown RowKind, or feeds updates to an operator that takes insert-only input."""


class ChangelogAssertionError(ChangelogError, AssertionError):
    """An operator's output broke the changelog invariant of docs/semantics.md §1.1, found by the changelog
    assertions a session turns on (``streamjoin.runtime.assertions``): a defect of the engine, not of the input."""


class StateError(StreamJoinError):
    """Operator state is inconsistent with the input (e.g. a retraction of an unknown row)."""


class IncompatibleStateError(StateError):
    """A checkpoint holds operator state that the query restarted on it cannot read: Spark refuses the state's
    schema or operators (``STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE`` and the like), because the pipeline's SQL,
    its operator engine or streamjoin's state layout changed since the checkpoint was written. As Flink refuses
    a savepoint whose state does not map to the new program."""


class EngineError(StreamJoinError):
    """The jvm operator engine cannot run here: its jar is not on the session's classpath, or it was
    built for another Spark version (``streamjoin.jvm``)."""


class SinkError(StreamJoinError):
    """The sink cannot take the changes it is given (refused when planning, or by the Delta writer)."""


class ConnectorError(StreamJoinError):
    """An external system a connector talks to (a Kafka cluster, the embedded broker) failed."""


class EmbeddedKafkaError(ConnectorError):
    """The embedded broker cannot be set up, did not start, or died."""


class TopicRecreatedError(ConnectorError):
    """A Kafka topic a checkpoint reads was deleted and created again: its offsets no longer apply
    (``streamjoin.connectors.topic_identity``)."""


class ConnectorTimeoutError(ConnectorError, TimeoutError):
    """A wait on a Kafka cluster (topic leaders, deletion, produce acknowledgements) ran out."""
