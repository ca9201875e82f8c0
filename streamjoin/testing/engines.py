"""Both engines' shells driven in process, row by row, on the same prepared input (differential tests).

An operator function (``deduplicate``, ``regular_join``, ...) prepares its input DataFrame and
hands it, with its :class:`~streamjoin.runtime.processor.KeyedProcessor`, grouping key and output
schema, to :meth:`KeyedProcessor.apply`. :func:`capture` calls the operator function on static
DataFrames with that one call recorded instead of building a query, so the prepared rows are
exactly what the operator would hand either engine. :func:`run_engines` then feeds them, with the
watermark / processing-time steps of a schedule, to

* the python shell (``KeyedProcessor``) through PySpark's ``TwsTester``
  (``pyspark.sql.streaming.tws_tester``), and
* the jvm shell (``streamjoin.operators.KeyedOperator`` with the logic's Scala twin) through
  Spark's Scala ``TwsTester``, reached over py4j as ``streamjoin.operators.LocalRun``,

and returns both changelogs, step by step. Values are compared in Spark's internal form (a
TIMESTAMP as microseconds, a DECIMAL at its type's scale, a FLOAT at single precision), as a
query would store them. Neither tester implements state TTL's expiry (PySpark's ignores TTL).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from unittest import mock

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, Row
from pyspark.sql.streaming.tws_tester import TwsTester
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    StructType,
)

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.runtime.processor import KeyedProcessor

__all__ = ["Captured", "Visit", "Watermark", "ProcessingTime", "Step", "capture", "visits", "run_engines", "EngineRun"]

#: One output change as compared: ``(RowKind short string, output values in internal form, _seq)``.
Change = tuple[str, tuple, int]


@dataclass
class Captured:
    """One :meth:`KeyedProcessor.apply` call of an operator function.

    Attributes:
        processor: the python shell with its logic (its Scala twin: ``processor.logic.jvm_logic()``).
        prepared: the prepared input DataFrame (static).
        key: the grouping key columns.
        output: the output schema (output columns, ``_rowkind``, ``_seq``).
    """

    processor: KeyedProcessor
    prepared: DataFrame
    key: list[str]
    output: StructType

    def rows(self) -> list[Row]:
        """The prepared rows, in input order (``_seq``, then as the operator unioned them)."""
        return sorted(self.prepared.collect(), key=lambda r: r[SEQ_COLUMN])


def capture(build: Callable[[], Any]) -> list[Captured]:
    """Call ``build()`` (an operator function over static DataFrames), recording its shells' ``apply``
    calls instead of building queries; each recorded call returns an empty DataFrame of its output
    schema, so the operator function completes."""
    calls: list[Captured] = []

    def record(processor: KeyedProcessor, df: DataFrame, key: Sequence[str], output: StructType) -> DataFrame:
        calls.append(Captured(processor, df, list(key), output))
        return df.sparkSession.createDataFrame([], output)

    with mock.patch.object(KeyedProcessor, "apply", record):
        build()
    return calls


@dataclass(frozen=True)
class Visit:
    """A micro-batch's rows of one key (prepared rows), processed in one ``handleInputRows`` call."""

    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Watermark:
    """Spark's watermark rises to ``ms``; the expired Spark timers fire."""

    ms: int


@dataclass(frozen=True)
class ProcessingTime:
    """Spark's processing time rises to ``ms``; the expired Spark timers fire."""

    ms: int


Step = Visit | Watermark | ProcessingTime


def visits(rows: Iterable[Row], watermarks: Iterable[int] | None = None) -> list[Step]:
    """One row per micro-batch: a :class:`Visit` per row, each after a :class:`Watermark` step to
    ``watermarks[i]`` when it rises (Spark's watermark at one row per micro-batch)."""
    steps: list[Step] = []
    current = 0
    for row, mark in zip(rows, watermarks if watermarks is not None else _nones()):
        if mark is not None and mark > current:
            steps.append(Watermark(mark))
            current = mark
        steps.append(Visit((row,)))
    return steps


def _nones():
    while True:
        yield None


@dataclass
class EngineRun:
    """Both engines' output per step (a failing step ends the run with its error message).

    Attributes:
        python / jvm: per step, the changes emitted (``(RowKind short, values, _seq)``), in order.
        python_error / jvm_error: the message of the error that ended the run, or None.
    """

    python: list[list[Change]]
    jvm: list[list[Change]]
    python_error: str | None = None
    jvm_error: str | None = None

    def changes(self, engine: str = "python") -> list[Change]:
        """The engine's changes over all steps, in emission order."""
        return [c for step in getattr(self, engine) for c in step]

    def assert_equal(self, *, ordered: bool = True) -> None:
        """The two engines emitted the same changes, step by step; a step that fired several keys'
        timers is compared in ``(_seq, values)`` order, since the testers visit keys in their own order.
        ``ordered=False`` compares each step's changes as a multiset, for operators whose changes for
        one row follow a ``MapState``'s iteration order (the regular join's matches: RocksDB's key
        order on Spark, a hash order in the testers, as in Flink)."""
        assert self.python_error == self.jvm_error, (self.python_error, self.jvm_error)
        assert len(self.python) == len(self.jvm)
        for i, (ours, theirs) in enumerate(zip(self.python, self.jvm)):
            if not ordered:  # the same changes, and the same _seq values among them
                ours, theirs = (
                    (sorted(((kind, values) for kind, values, _ in step), key=repr), sorted(seq for _, _, seq in step))
                    for step in (ours, theirs)
                )
            assert ours == theirs, f"step {i}: python {ours} != jvm {theirs}"


def run_engines(captured: Captured, steps: Sequence[Step]) -> EngineRun:
    """Feed ``steps`` to the captured operator on both engines (see the module docstring)."""
    processor = captured.processor
    twin = processor.logic.jvm_logic()
    if twin is None:
        raise AssertionError(f"{type(processor.logic).__name__} has no Scala twin")
    schema = captured.prepared.schema
    output = captured.output
    spark = captured.prepared.sparkSession
    event_time = processor.time_mode == "EventTime"
    python = TwsTester(
        processor,
        timeMode=processor.time_mode,
        eventTimeExtractor=(lambda row: 2**62) if event_time else None,
    )
    jvm = spark.sparkContext._jvm.streamjoin.operators.LocalRun(
        schema.json(),
        list(captured.key),
        output.json(),
        f"streamjoin.operators.{twin.logic_class}",
        json.dumps(twin.spec),
        processor.clock,
        int(processor.state_ttl_ms or 0),
    )
    key_types = [schema[c].dataType for c in captured.key]
    run = EngineRun([], [])
    for step in steps:
        if isinstance(step, Visit):
            first = step.rows[0]
            key = tuple(first[c] for c in captured.key)
            key_json = json.dumps([_to_json(t.toInternal(v), t) for t, v in zip(key_types, key)])
            rows_json = json.dumps([_to_json(schema.toInternal(r), schema) for r in step.rows])
            ours = _attempt(lambda: python.test(key, list(step.rows)))
            theirs = _attempt(lambda: jvm.test(key_json, rows_json))
        elif isinstance(step, Watermark):
            ours = _attempt(lambda: python.setWatermark(step.ms))
            theirs = _attempt(lambda: jvm.setWatermark(step.ms))
        else:
            ours = _attempt(lambda: python.setProcessingTime(step.ms))
            theirs = _attempt(lambda: jvm.setProcessingTime(step.ms))
        if isinstance(ours, Exception) or isinstance(theirs, Exception):
            run.python_error = _message(ours)
            run.jvm_error = _message(theirs)
            break
        run.python.append(_order([_change(output, output.toInternal(r)) for r in ours], step))
        run.jvm.append(_order([_change(output, _from_json(r, output)) for r in json.loads(theirs)], step))
    return run


def _attempt(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - compared between the engines
        return error


def _message(result: Any) -> str | None:
    """An error's message as the user sees it: the Python exception's text, or the Java exception's
    message (the Scala twins throw IllegalStateException with the Python logic's text)."""
    if not isinstance(result, Exception):
        return None
    if isinstance(result, Py4JJavaError):
        cause = result.java_exception
        while cause.getCause() is not None:
            cause = cause.getCause()
        return str(cause.getMessage())
    return str(result)


def _order(changes: list[Change], step: Step) -> list[Change]:
    return changes if isinstance(step, Visit) else sorted(changes, key=lambda c: (c[2], repr(c[1])))


def _change(output: StructType, internal: tuple) -> Change:
    names = output.names
    values = tuple(_canonical(v, f.dataType) for v, f in zip(internal, output.fields))
    kind = values[names.index(ROWKIND_COLUMN)]
    seq = values[names.index(SEQ_COLUMN)]
    return kind, tuple(v for n, v in zip(names, values) if n not in (ROWKIND_COLUMN, SEQ_COLUMN)), seq


def _canonical(value: Any, data_type: DataType) -> Any:
    """An internal value as compared: exact for DECIMAL (its type's scale) and FLOAT (single
    precision), NaN as the string ``"NaN"`` (NaN is not equal to itself)."""
    if value is None:
        return None
    if isinstance(data_type, DecimalType):
        return Decimal(value).quantize(Decimal(1).scaleb(-data_type.scale))
    if isinstance(data_type, (FloatType, DoubleType)):
        number = float(value)
        if isinstance(data_type, FloatType):
            number = struct.unpack("f", struct.pack("f", number))[0]
        return "NaN" if math.isnan(number) else number
    if isinstance(data_type, ArrayType):
        return tuple(_canonical(v, data_type.elementType) for v in value)
    if isinstance(data_type, StructType):
        return tuple(_canonical(v, f.dataType) for v, f in zip(value, data_type.fields))
    return value


def _to_json(value: Any, data_type: DataType) -> Any:
    """An internal value in the JSON form ``streamjoin.operators.InternalJson`` reads."""
    if value is None:
        return None
    if isinstance(data_type, DecimalType):
        return str(value)
    if isinstance(data_type, (FloatType, DoubleType)):
        return value if math.isfinite(value) else repr(float(value)).replace("inf", "Infinity").replace("nan", "NaN")
    if isinstance(data_type, ArrayType):
        return [_to_json(v, data_type.elementType) for v in value]
    if isinstance(data_type, StructType):
        return [_to_json(v, f.dataType) for v, f in zip(value, data_type.fields)]
    return value


def _from_json(value: Any, data_type: DataType) -> Any:
    """The JSON form ``streamjoin.operators.InternalJson`` writes, as an internal value."""
    if value is None:
        return None
    if isinstance(data_type, DecimalType):
        return Decimal(value)
    if isinstance(data_type, (FloatType, DoubleType)):
        return float(value)
    if isinstance(data_type, ArrayType):
        return [_from_json(v, data_type.elementType) for v in value]
    if isinstance(data_type, StructType):
        return tuple(_from_json(v, f.dataType) for v, f in zip(value, data_type.fields))
    return value
