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
  Spark's Scala ``TwsTester``, reached over py4j as ``streamjoin.operators.LocalRun``: a test-only
  class of the tools jar that ``make operators`` puts next to the operators jar
  (:func:`tools_jar`), loaded by a class loader of its own under the operators jar's,

and returns both changelogs, step by step. Values are compared in Spark's internal form (a
TIMESTAMP as microseconds, a DECIMAL at its type's scale, a FLOAT at single precision), as a
query would store them. :func:`run_two_steps` chains an operator function's two shells (the
outer joins with a residual predicate): each engine's first-step output passes through the
operator's own Spark filter into that engine's second step.

The ``instant`` clock (processing-time OVER) reads the wall clock, and both testers run it in
``timeMode="None"``: a :class:`ProcessingTime` step sets the wall clock both shells read instead.

Neither tester expires state TTL: PySpark's ignores TTL (its docstring: "States persist
indefinitely, even if TTLConfig is set"), and Spark 4.2.0's Scala in-memory states
(``InMemoryValueState`` / ``InMemoryListState`` / ``InMemoryMapState`` of
``...transformwithstate.testing``) take a clock and a ``TTLConfig`` and use neither. TTL expiry
is compared on real queries (``tests/test_state_ttl_engines.py``).
"""

from __future__ import annotations

import json
import math
import struct
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    StructType,
)

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, with_seq_path
from streamjoin.contract import encode
from streamjoin.jvm import operators_jar
from streamjoin.runtime.processor import KeyedProcessor

__all__ = [
    "Captured",
    "EngineRun",
    "ProcessingTime",
    "Step",
    "Visit",
    "Watermark",
    "capture",
    "run_engines",
    "run_two_steps",
    "tools_jar",
    "visits",
]

#: One output change as compared: ``(RowKind short string, output values in internal form, _seq)``.
Change = tuple[str, tuple, bytes]


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


def capture(build: Callable[[], Any], outputs: Sequence[DataFrame] = ()) -> list[Captured]:
    """Call ``build()`` (an operator function over static DataFrames), recording its shells' ``apply``
    calls instead of building queries; the i-th recorded call returns ``outputs[i]`` (a DataFrame of
    its output schema) if given, else an empty one, so the operator function completes."""
    calls: list[Captured] = []

    def record(processor: KeyedProcessor, df: DataFrame, key: Sequence[str], output: StructType) -> DataFrame:
        calls.append(Captured(processor, with_seq_path(df), list(key), output))
        if len(calls) <= len(outputs):
            return outputs[len(calls) - 1]
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
    """Spark's processing time rises to ``ms``; the expired Spark timers fire (with the ``instant``
    clock: the wall clock both shells read is ``ms`` from now on)."""

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
        python_rows / jvm_rows: per step, the output rows as a query would hand them on (external
            values), in the order of ``python`` / ``jvm``.
    """

    python: list[list[Change]]
    jvm: list[list[Change]]
    python_error: str | None = None
    jvm_error: str | None = None
    python_rows: list[list[Row]] = field(default_factory=list)
    jvm_rows: list[list[Row]] = field(default_factory=list)

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
            if ordered:
                assert ours == theirs, f"step {i}: python {ours} != jvm {theirs}"
                continue
            # The same changes, and the same _seq values among them.
            mine, other = (
                (sorted(((kind, values) for kind, values, _ in step), key=repr), sorted(seq for _, _, seq in step))
                for step in (ours, theirs)
            )
            assert mine == other, f"step {i}: python {mine} != jvm {other}"


def run_engines(
    captured: Captured, steps: Sequence[Step], jvm_steps: Sequence[Step] | None = None, *, with_python: bool = True
) -> EngineRun:
    """Feed ``steps`` to the captured operator on both engines (see the module docstring); the jvm
    engine gets ``jvm_steps`` instead when given (the same kinds of step, in the same order).
    ``with_python=False`` runs the jvm shell alone, each python step empty: for a logic only its
    Scala twin runs (the regular join evaluating its residual predicate inside the join)."""
    processor = captured.processor
    twin = processor.logic.jvm_logic()
    if twin is None:
        raise AssertionError(f"{type(processor.logic).__name__} has no Scala twin")
    schema = captured.prepared.schema
    output = captured.output
    spark = captured.prepared.sparkSession
    event_time = processor.time_mode == "EventTime"
    wall_clock = processor.clock == "instant"
    processor.assertions = True  # as LocalRun's jvm shell: every visit checked (streamjoin.runtime.assertions)
    python = TwsTester(
        _TupleKey(processor),
        timeMode=processor.time_mode,
        eventTimeExtractor=(lambda row: 2**62) if event_time else None,
    )
    jvm = _local_run(
        spark,
        schema.json(),
        list(captured.key),
        output.json(),
        f"streamjoin.operators.{twin.logic_class}",
        encode(twin.spec),
        processor.clock,
        int(processor.state_ttl_ms or 0),
    )
    key_types = [schema[c].dataType for c in captured.key]
    now_ms = [0]
    run = EngineRun([], [])
    with mock.patch("streamjoin.runtime.processor.wall_clock_seconds", lambda: (now_ms[0] + 0.5) / 1000):
        for step, jvm_step in zip(steps, steps if jvm_steps is None else jvm_steps, strict=True):
            assert type(step) is type(jvm_step), (step, jvm_step)
            if isinstance(step, Visit) and isinstance(jvm_step, Visit):
                key = tuple(step.rows[0][c] for c in captured.key)
                ours = _attempt(partial(python.test, key, list(step.rows))) if with_python else []
                jvm_key = tuple(jvm_step.rows[0][c] for c in captured.key)
                key_json = json.dumps([_to_json(t.toInternal(v), t) for t, v in zip(key_types, jvm_key)])
                rows_json = json.dumps([_to_json(schema.toInternal(r), schema) for r in jvm_step.rows])
                theirs = _attempt(partial(jvm.test, key_json, rows_json))
            elif isinstance(step, Watermark) and isinstance(jvm_step, Watermark):
                ours = _attempt(partial(python.setWatermark, step.ms)) if with_python else []
                theirs = _attempt(partial(jvm.setWatermark, jvm_step.ms))
            elif isinstance(step, ProcessingTime) and isinstance(jvm_step, ProcessingTime) and wall_clock:
                now_ms[0] = step.ms
                jvm.setWallClock(jvm_step.ms)
                ours, theirs = [], "[]"
            elif isinstance(step, ProcessingTime) and isinstance(jvm_step, ProcessingTime):
                ours = _attempt(partial(python.setProcessingTime, step.ms)) if with_python else []
                theirs = _attempt(partial(jvm.setProcessingTime, jvm_step.ms))
            else:
                raise AssertionError(f"steps of different kinds: {step} and {jvm_step}")
            if isinstance(ours, Exception) or isinstance(theirs, Exception):
                run.python_error = _message(ours)
                run.jvm_error = _message(theirs)
                break
            internal = [_from_json(r, output) for r in json.loads(theirs)]
            for changes, rows, out in (
                (run.python, run.python_rows, [(_change(output, output.toInternal(r)), r) for r in ours]),
                (run.jvm, run.jvm_rows, [(_change(output, v), output.fromInternal(v)) for v in internal]),
            ):
                if not isinstance(step, Visit):  # the testers visit keys in their own order
                    out.sort(key=lambda pair: (pair[0][2], repr(pair[0][1])))
                changes.append([change for change, _ in out])
                rows.append([row for _, row in out])
    return run


#: ``_seq`` of a first step's output as fed to the operator's filter: the step's number in this many bytes,
#: then the row's ``_seq``, so each row's step survives the filter (``_seq`` passes it unchanged).
_STEP_BYTES = 8


def run_two_steps(
    build: Callable[[], Any], steps: Callable[[Captured], Sequence[Step]], *, ordered: bool = True
) -> EngineRun:
    """Run an operator function with two chained shells (an outer join with a residual predicate:
    the regular join's candidate and associate steps, the interval join's candidate step and
    :class:`~streamjoin.runtime.interval_join.residual.ResidualPaddingLogic`) on both engines.

    ``steps(first shell)`` drive the first shell (:func:`run_engines`); its output must be equal on
    both engines, or with ``ordered=False`` (when it numbers rows in state order, as the regular
    join's candidate pairs) end at the same step with the same error. Each engine's first-step output then goes
    through what the operator function puts between the shells (the Spark filter by the predicate,
    the grouping columns), captured with that output in place of the first shell's, and reaches the
    same engine's second shell as a query would hand it on: per first-step step, one visit per key
    in ``_seq`` order (with that step's watermark or processing time where the second shell's time
    mode has it). Returns the second shell's run.

    Raises:
        AssertionError: when ``build`` does not apply exactly two shells, or the first steps differ
            (as told above).
    """
    shells = capture(build)
    if len(shells) != 2:
        raise AssertionError(f"{len(shells)} shells applied, not two")
    first = shells[0]
    first_steps = steps(first)
    head = run_engines(first, first_steps)
    if ordered:
        head.assert_equal()
    else:  # its rows may number what they carry in state order (the regular join's candidate pairs)
        assert (head.python_error, len(head.python)) == (head.jvm_error, len(head.jvm)), (
            head.python_error,
            head.jvm_error,
        )
    time_mode = shells[1].processor.time_mode
    spark = first.prepared.sparkSession

    def second_steps(outputs: list[list[Row]]) -> tuple[Captured, list[Step]]:
        seq = first.output.names.index(SEQ_COLUMN)
        rows = [
            (*r[:seq], i.to_bytes(_STEP_BYTES, "big") + bytes(r[seq]), *r[seq + 1 :])
            for i, step in enumerate(outputs)
            for r in step
        ]
        _, second = capture(build, [spark.createDataFrame(rows, first.output)])
        per_step: dict[int, dict[tuple, list[Row]]] = defaultdict(lambda: defaultdict(list))
        for r in second.rows():
            index, number = int.from_bytes(r[SEQ_COLUMN][:_STEP_BYTES], "big"), bytes(r[SEQ_COLUMN][_STEP_BYTES:])
            per_step[index][tuple(r[c] for c in second.key)].append(Row(**{**r.asDict(), SEQ_COLUMN: number}))
        fed: list[Step] = []
        for i, step in enumerate(first_steps[: len(outputs)]):
            if (
                isinstance(step, Watermark)
                and time_mode == "EventTime"
                or (isinstance(step, ProcessingTime) and time_mode == "ProcessingTime")
            ):
                fed.append(step)
            fed += [Visit(tuple(rows)) for _, rows in sorted(per_step[i].items(), key=lambda item: repr(item[0]))]
        return second, fed

    second, python_steps = second_steps(head.python_rows)
    _, jvm_steps = second_steps(head.jvm_rows)
    run = run_engines(second, python_steps, jvm_steps)
    run.python_error, run.jvm_error = run.python_error or head.python_error, run.jvm_error or head.jvm_error
    return run


class _TupleKey(StatefulProcessor):
    """The shell with the grouping key as a query hands it over: PySpark's ``TwsTester`` passes a
    visit's key ``k`` as ``(k,)`` (one key column), so it gets the key's tuple of values as ``k``."""

    def __init__(self, processor: KeyedProcessor) -> None:
        self.processor = processor

    def init(self, handle) -> None:
        self.processor.init(handle)

    def handleInputRows(self, key, rows, timerValues):
        return self.processor.handleInputRows(key[0], rows, timerValues)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        return self.processor.handleExpiredTimer(key[0], timerValues, expiredTimerInfo)

    def close(self) -> None:
        self.processor.close()


def tools_jar() -> Path:
    """The jar of the operators' test-only harness ``LocalRun``, which ``make operators`` builds from
    ``jvm/operators/src/test`` next to the operators jar (``.local/jars/operators/streamjoin-operators-tools.jar``)."""
    return operators_jar().with_name("streamjoin-operators-tools.jar")


def _local_run(spark: Any, schema_json: str, key: list[str], output_json: str, *args: Any) -> Any:
    """A new ``streamjoin.operators.LocalRun`` (its constructor's arguments: see ``LocalRun.scala``).

    The session's jars hold the operators jar only; the tools jar is loaded here by a class loader of
    its own whose parent is the operators jar's, so that ``LocalRun`` sees the operators, Spark and
    Jackson, once per session (py4j then calls its methods on the instance as on any object).
    """
    context = spark.sparkContext
    gateway = context._gateway
    jvm = context._jvm
    local_run = getattr(context, "_streamjoin_local_run", None)
    if local_run is None:
        jar = tools_jar()
        if not jar.exists():
            raise AssertionError(f"no {jar}: `make operators` builds it (the differential tests need it)")
        operators = jvm.java.lang.Class.forName(
            "streamjoin.operators.Operators", False, jvm.java.lang.Thread.currentThread().getContextClassLoader()
        )
        urls = gateway.new_array(jvm.java.net.URL, 1)
        urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
        loader = jvm.java.net.URLClassLoader(urls, operators.getClassLoader())
        local_run = loader.loadClass("streamjoin.operators.LocalRun").getConstructors()[0]
        context._streamjoin_local_run = local_run
    keys = jvm.java.util.ArrayList()
    for column in key:
        keys.add(column)
    values = [schema_json, keys, output_json, *args]
    arguments = gateway.new_array(jvm.java.lang.Object, len(values))
    for i, value in enumerate(values):
        arguments[i] = value
    return local_run.newInstance(arguments)


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
    if isinstance(data_type, BinaryType):
        return bytes(value).hex()
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
    if isinstance(data_type, BinaryType):
        return bytes.fromhex(value)
    if isinstance(data_type, (FloatType, DoubleType)):
        return float(value)
    if isinstance(data_type, ArrayType):
        return [_from_json(v, data_type.elementType) for v in value]
    if isinstance(data_type, StructType):
        return tuple(_from_json(v, f.dataType) for v, f in zip(value, data_type.fields))
    return value
