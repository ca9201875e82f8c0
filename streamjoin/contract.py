"""The one typed contract between the Python planner and the jvm engine's jar.

Everything the Python side decides and the JVM side runs crosses here, and nowhere else:

* **Specs**: for each per-key logic of ``jvm/operators`` (and the Kafka records' fast decoder), one frozen
  dataclass below carries what the planner decided — columns, keys, state layouts, time attributes, flags.
  :func:`encode` turns a spec into JSON, checking every value against the field's annotation; field
  ``snake_case`` names become ``camelCase`` JSON keys, the Scala field names. The Scala twin of each spec, a
  case class with a strict decoder (a missing, unknown or mistyped key fails), is *generated* from these
  classes into ``jvm/operators/src/main/scala/streamjoin/operators/OperatorSpecs.scala`` by
  ``python -m streamjoin.contract`` (``make operator-specs``); ``tests/test_contract.py`` fails when the
  generated file is stale or a Scala logic leaves a field unread, and the Scala compiler when a logic reads a
  field that is gone.
* **Shared constants** (:data:`CONSTANTS`): the changelog's column names, the RowKind strings, the clock
  names, the union frame's columns and the late-row state's name, defined here once and generated into the
  Scala object ``Contract``.

Types a spec field may have, and their Scala twins: ``str`` (``String``), ``bool`` (``Boolean``), ``int``
(``Long``; milliseconds, offsets), :data:`Position` (``Int``: a position in a row), ``Literal[...]`` of
strings (``String``, checked against the values on both sides), ``X | None`` (``Option[X]``, JSON null),
``tuple[X, ...]`` (``Seq[X]``, a JSON array), ``tuple[X, X]`` (``Seq[X]`` of that length),
``StructType`` and ``DataType`` (Spark's, as their JSON), and another spec (a nested object).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NewType, Union

from pyspark.sql.types import DataType, StructType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind

__all__ = [
    "ASSERTIONS_CONF",
    "CLOCKS",
    "CONSTANTS",
    "KEY_COLUMN_PREFIX",
    "LATE_STATE",
    "LEFT_ROW_COLUMN",
    "PAIR_COLUMN",
    "RIGHT_ROW_COLUMN",
    "SIDE_COLUMN",
    "SPECS",
    "AggregateCallSpec",
    "ChangeDecoderSpec",
    "ChangelogNormalizeSpec",
    "Clock",
    "DeduplicateSpec",
    "GroupAggregateSpec",
    "IntervalJoinSpec",
    "OverAggregateSpec",
    "Position",
    "RankSpec",
    "RegularJoinSpec",
    "ResidualPaddingSpec",
    "SinkUpsertMaterializerSpec",
    "SortFieldSpec",
    "TemporalJoinSpec",
    "TwoInputSpec",
    "WindowAggregateSpec",
    "WindowJoinSpec",
    "WindowRankSpec",
    "encode",
    "scala_source",
]

#: A position in a row (0-based), an ``Int`` in Scala.
Position = NewType("Position", int)

#: What a key's current time is: ``none`` (no timers), ``event`` (Spark's watermark), ``processing`` (the
#: micro-batch's processing time), ``instant`` (the wall clock, read once per key visit).
Clock = Literal["none", "event", "processing", "instant"]
CLOCKS: tuple[str, ...] = typing.get_args(Clock)

#: State variable mirroring a key's count of rows dropped as late (Flink's ``numLateRecordsDropped`` metric).
LATE_STATE = "numLateRecordsDropped"
#: The Spark setting that turns the changelog assertions on (docs/semantics.md §1.1).
ASSERTIONS_CONF = "spark.streamjoin.changelogAssertions"
#: Column of the side tag (INT) in a two-input operator's union frame.
SIDE_COLUMN = "_side"
#: Column of the left row (STRUCT) in the union frame, null on right rows.
LEFT_ROW_COLUMN = "_left"
#: Column of the right row (STRUCT) in the union frame, null on left rows.
RIGHT_ROW_COLUMN = "_right"
#: Prefix of the union frame's grouping-key columns: ``_key0``, ``_key1``, ...
KEY_COLUMN_PREFIX = "_key"
#: Column of a regular join's candidate step: 0 for the change, 1… for its candidate pairs (INT).
PAIR_COLUMN = "_pair"

#: The constants both sides use, by their Scala name in ``object Contract``.
CONSTANTS: dict[str, str] = {
    "RowKindColumn": ROWKIND_COLUMN,
    "SeqColumn": SEQ_COLUMN,
    "Insert": RowKind.INSERT.value,
    "UpdateBefore": RowKind.UPDATE_BEFORE.value,
    "UpdateAfter": RowKind.UPDATE_AFTER.value,
    "Delete": RowKind.DELETE.value,
    "ClockNone": "none",
    "ClockEvent": "event",
    "ClockProcessing": "processing",
    "ClockInstant": "instant",
    "LateState": LATE_STATE,
    "SideColumn": SIDE_COLUMN,
    "LeftRowColumn": LEFT_ROW_COLUMN,
    "RightRowColumn": RIGHT_ROW_COLUMN,
    "KeyColumnPrefix": KEY_COLUMN_PREFIX,
    "PairColumn": PAIR_COLUMN,
    "AssertionsConf": ASSERTIONS_CONF,
}
assert sorted(v for k, v in CONSTANTS.items() if k.startswith("Clock")) == sorted(CLOCKS)

AggregateFunctionName = Literal["COUNT", "COUNT_DISTINCT", "SUM", "AVG", "MIN", "MAX", "FIRST_VALUE", "LAST_VALUE"]
JoinTypeName = Literal["inner", "left", "right", "full", "semi", "anti"]
StateLayoutName = Literal["JoinKeyContainsUniqueKey", "InputSideHasUniqueKey", "InputSideHasNoUniqueKey"]
OverFunctionName = Literal[
    "RowTimeRowsBoundedPrecedingFunction",
    "RowTimeRangeBoundedPrecedingFunction",
    "RowTimeRowsUnboundedPrecedingFunction",
    "RowTimeRangeUnboundedPrecedingFunction",
    "ProcTimeRowsBoundedPrecedingFunction",
    "ProcTimeUnboundedPrecedingFunction",
    "ProcTimeRangeBoundedPrecedingFunction",
]


@dataclass(frozen=True)
class AggregateCallSpec:
    """One aggregate ``function(column)`` of a GROUP BY or an OVER window (docs/semantics.md §5, §6).

    The aggregates of a spec are in output order; the output schema names their columns.

    Attributes:
        function: the aggregate function, upper-case.
        column: the argument column, None only for ``COUNT(*)``.
        result_type: the result's Spark type, as :func:`streamjoin.runtime.aggregates.result_type` decides it.
    """

    function: AggregateFunctionName
    column: str | None
    result_type: DataType


@dataclass(frozen=True)
class GroupAggregateSpec:
    """Flink's ``GroupAggFunction`` (``MiniBatchGroupAggFunction`` with ``mini_batch``), docs/semantics.md §6.

    Attributes:
        columns: the input row's columns, in order (the grouping key's among them).
        group_by: the grouping key's columns.
        aggregates: the aggregates, in output order.
        retractable: whether the input retracts (retractable accumulators, Flink's ``*WithRetract*``).
        mini_batch: whether a key's changes of one micro-batch fold into one bundle before emitting.
    """

    columns: tuple[str, ...]
    group_by: tuple[str, ...]
    aggregates: tuple[AggregateCallSpec, ...]
    retractable: bool
    mini_batch: bool


@dataclass(frozen=True)
class OverAggregateSpec:
    """An OVER aggregation's process function (Flink's ``operators/over``), docs/semantics.md §5.

    Attributes:
        function: Flink's name of the process function (frame kind × time domain).
        offset: a bounded frame's size: rows, the current one counted (ROWS), or ms (RANGE); None when unbounded.
        columns: the input row's columns, in order.
        aggregates: the aggregates, in output order.
        retractable: whether the frame is bounded (values leave it again).
        order_by: the ORDER BY column, None on processing time.
        rowtime_column: the column holding the row's time in epoch ms (LONG).
        watermark_column: the column of the per-row watermark (LONG ms), or None.
    """

    function: OverFunctionName
    offset: int | None
    columns: tuple[str, ...]
    aggregates: tuple[AggregateCallSpec, ...]
    retractable: bool
    order_by: str | None
    rowtime_column: str
    watermark_column: str | None


@dataclass(frozen=True)
class WindowAggregateSpec:
    """A window aggregate (Flink's ``WindowAggOperator``), docs/semantics.md §11.

    Attributes:
        columns: the input row's columns, in order (the grouping key's and the window's among them).
        group_by: the grouping key's columns (without the window's).
        window_start: the column of the row's window start (TIMESTAMP).
        window_end: the column of the row's window end (TIMESTAMP).
        window_end_ms: the column of the row's window end in epoch ms (LONG).
        aggregates: the aggregates, in output order.
        retractable: whether the input retracts (retractable accumulators, Flink's ``*WithRetract*``).
        watermark_column: the column of the per-row watermark (LONG ms), or None.
        session_gap_ms: a session window aggregate's gap (ms): each row's window is its own ``[t, t + gap)``, merged
            into sessions; None for the windows of TUMBLE, HOP and CUMULATE.
    """

    columns: tuple[str, ...]
    group_by: tuple[str, ...]
    window_start: str
    window_end: str
    window_end_ms: str
    aggregates: tuple[AggregateCallSpec, ...]
    retractable: bool
    watermark_column: str | None
    session_gap_ms: int | None


@dataclass(frozen=True)
class SortFieldSpec:
    """One ORDER BY field of a rank: its column, direction and where NULLs sort (absolute, not per direction)."""

    column: str
    ascending: bool
    nulls_first: bool


@dataclass(frozen=True)
class WindowRankSpec:
    """A window Top-N (Flink's ``WindowRankOperator``), docs/semantics.md §11.3.

    Attributes:
        columns: the input row's columns, in order (the output's, before the rank).
        window_end: the column of the row's window end (TIMESTAMP).
        window_end_ms: the column of the row's window end in epoch ms (LONG).
        order_by: the ORDER BY fields, in order.
        rank_start: the first rank emitted (1-based).
        rank_end: the last rank emitted.
        newest_first_on_ties: rows that tie rank newest first (a window deduplication keeping the last row), else
            in arrival order.
        watermark_column: the column of the per-row watermark (LONG ms), or None.
    """

    columns: tuple[str, ...]
    window_end: str
    window_end_ms: str
    order_by: tuple[SortFieldSpec, ...]
    rank_start: int
    rank_end: int
    newest_first_on_ties: bool
    watermark_column: str | None


@dataclass(frozen=True)
class RankSpec:
    """A Top-N over a changelog (Flink's ``operators/rank`` functions), docs/semantics.md §6.4.

    Attributes:
        columns: the input row's columns, in order (the output's, before the rank).
        order_by: the ORDER BY fields, in order.
        rank_start: the first rank emitted (1-based).
        rank_end: the last rank emitted.
        output_rank: whether the output row ends with its rank (BIGINT).
        strategy: Flink's function: ``first`` (``AppendOnlyFirstNFunction``), ``top1`` (``FastTop1Function``),
            ``append`` (``AppendOnlyTopNFunction``), ``update`` (``UpdatableTopNFunction``), ``retract``
            (``RetractableTopNFunction``).
        row_key: the columns of the row key (``update``: the input's upsert key), else empty.
    """

    columns: tuple[str, ...]
    order_by: tuple[SortFieldSpec, ...]
    rank_start: int
    rank_end: int
    output_rank: bool
    strategy: Literal["first", "top1", "append", "update", "retract"]
    row_key: tuple[str, ...]


@dataclass(frozen=True)
class DeduplicateSpec:
    """Deduplication, ``ROW_NUMBER() OVER (PARTITION BY key ORDER BY t) = 1`` (Flink's ``operators/deduplicate``).

    Attributes:
        keep: which row of a key is kept.
        ordered: whether rows carry an order value (``_order``) that decides, else arrival order (Flink's
            ``RowTime*`` functions, else its ``ProcTime*`` ones; keeping the first row, the order value is a rowtime
            behind a watermark: late rows are dropped).
        columns: the input row's columns, in order.
        watermark_column: the column of the per-row watermark (LONG ms), or None.
        proctime_columns: the columns that are ``PROCTIME()`` values (ignored when comparing rows).
        state_ttl: whether a state TTL is set (an expired key's next row starts afresh).
    """

    keep: Literal["first", "last"]
    ordered: bool
    columns: tuple[str, ...]
    watermark_column: str | None
    proctime_columns: tuple[str, ...]
    state_ttl: bool


@dataclass(frozen=True)
class ChangelogNormalizeSpec:
    """Flink's ``ChangelogNormalize``: an upsert changelog made a full changelog (docs/semantics.md §1).

    Attributes:
        columns: the input row's columns, in order.
        update_before: whether ``-U`` rows are emitted.
        state_ttl: whether a state TTL is set.
    """

    columns: tuple[str, ...]
    update_before: bool
    state_ttl: bool


@dataclass(frozen=True)
class SinkUpsertMaterializerSpec:
    """Flink's ``SinkUpsertMaterializer`` (docs/semantics.md §1).

    Attributes:
        columns: the input row's columns, in order.
        upsert_key: the input's upsert key (rows compared on it), empty to compare whole rows.
    """

    columns: tuple[str, ...]
    upsert_key: tuple[str, ...]


@dataclass(frozen=True)
class RegularJoinSpec:
    """Flink's ``StreamingJoinOperator`` / ``StreamingSemiAntiJoinOperator`` (docs/semantics.md §2).

    Attributes:
        join_type: the join type.
        layouts: each side's state layout (Flink's ``JoinInputSideSpec``), left then right.
        unique_keys: each side's unique key (positions in the side's row), or None.
        stored: whether each side keeps its rows in state (a side no change ever probes does not).
        condition: the residual predicate (Spark SQL over the left and right columns) the join evaluates, or None.
    """

    join_type: JoinTypeName
    layouts: tuple[StateLayoutName, StateLayoutName]
    unique_keys: tuple[tuple[Position, ...] | None, tuple[Position, ...] | None]
    stored: tuple[bool, bool]
    condition: str | None


@dataclass(frozen=True)
class TwoInputSpec:
    """Where a keyed two-input operator's union frame holds its key and each side's times (``two_input``).

    Attributes:
        key_columns: the grouping key's columns (``_key0``, …).
        rowtime: per side (left, right), the position of the TIMESTAMP rowtime in the data row; None on
            processing time.
        row_watermark: per side, the position of the per-row watermark (LONG ms) in the row struct, or None.
    """

    key_columns: tuple[str, ...]
    rowtime: tuple[Position, Position] | None
    row_watermark: tuple[Position, Position] | None


@dataclass(frozen=True)
class IntervalJoinSpec:
    """Flink's ``TimeIntervalJoin`` (``RowTimeIntervalJoin`` / ``ProcTimeIntervalJoin``), docs/semantics.md §3.

    Attributes:
        inputs: the union frame's columns.
        how: the join type.
        lower_ms: the lower bound of the right row's time relative to the left row's, in ms (inclusive).
        upper_ms: the upper bound, in ms (inclusive).
        candidates: whether the operator emits each pair as a candidate for a residual predicate Spark
            evaluates afterwards (the python engine's outer joins with one), instead of joined rows.
        condition: the residual predicate the join evaluates itself, or None.
    """

    inputs: TwoInputSpec
    how: Literal["inner", "left", "right", "full"]
    lower_ms: int
    upper_ms: int
    candidates: bool
    condition: str | None


@dataclass(frozen=True)
class WindowJoinSpec:
    """Flink's ``WindowJoinOperator`` (docs/semantics.md §11.4); each side's rowtime column in ``inputs`` is its
    window end.

    Attributes:
        inputs: the union frame's columns.
        how: the join type.
        candidates: whether the operator emits each pair and each outer row's expiry as candidates for a residual
            predicate Spark evaluates afterwards (the python engine's outer joins with one), instead of joined rows.
        condition: the residual predicate the join evaluates itself, or None.
    """

    inputs: TwoInputSpec
    how: Literal["inner", "left", "right", "full", "semi", "anti"]
    candidates: bool
    condition: str | None


@dataclass(frozen=True)
class TemporalJoinSpec:
    """Flink's ``TemporalRowTimeJoinOperator`` (docs/semantics.md §4).

    Attributes:
        inputs: the union frame's columns (the probe side left, the versioned table right).
        how: the join type.
        append_only_versions: whether the versioned side is insert-only (no ``-D`` ends a version).
    """

    inputs: TwoInputSpec
    how: Literal["inner", "left"]
    append_only_versions: bool


@dataclass(frozen=True)
class ResidualPaddingSpec:
    """The null-padding step after an outer interval join's residual predicate (``interval_residual``).

    Attributes:
        columns: the input row's columns, in order.
        outer: whether the left and the right side are padded.
    """

    columns: tuple[str, ...]
    outer: tuple[bool, bool]


@dataclass(frozen=True)
class ChangeDecoderSpec:
    """The fast decoder of a Kafka topic's JSON records (``streamjoin.connectors.formats``).

    Attributes:
        format: the record format.
        rowkind_field: ``json``: the field holding the RowKind, None for insert-only records.
        columns: the declared columns.
        primary_key: the primary key's columns.
        time_zone: the session time zone TIMESTAMP strings are read in.
        upsert: whether the source is upsert-kafka (the key from the record key, a tombstone deletes).
        key_fields: upsert: the primary key's JSON fields in the record key, in ``primary_key`` order.
        except_key: upsert: ``value.fields-include`` is EXCEPT_KEY.
    """

    format: Literal["json", "debezium-json"]
    rowkind_field: str | None
    columns: StructType
    primary_key: tuple[str, ...]
    time_zone: str
    upsert: bool
    key_fields: tuple[str, ...]
    except_key: bool


#: Every spec type, in the order of the generated Scala file.
SPECS: tuple[type, ...] = (
    AggregateCallSpec,
    GroupAggregateSpec,
    OverAggregateSpec,
    WindowAggregateSpec,
    SortFieldSpec,
    WindowRankSpec,
    RankSpec,
    DeduplicateSpec,
    ChangelogNormalizeSpec,
    SinkUpsertMaterializerSpec,
    RegularJoinSpec,
    TwoInputSpec,
    IntervalJoinSpec,
    WindowJoinSpec,
    TemporalJoinSpec,
    ResidualPaddingSpec,
    ChangeDecoderSpec,
)


def camel(name: str) -> str:
    """A field's JSON key and Scala name: ``watermark_column`` → ``watermarkColumn``."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _hints(spec_type: type) -> dict[str, Any]:
    return typing.get_type_hints(spec_type)


def _is_optional(hint: Any) -> Any | None:
    """``X`` when ``hint`` is ``X | None``, else None."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0]
    return None


def _encode(value: Any, hint: Any, path: str) -> Any:
    inner = _is_optional(hint)
    if inner is not None:
        return None if value is None else _encode(value, inner, path)
    origin = typing.get_origin(hint)
    if origin is Literal:
        if value not in typing.get_args(hint):
            raise TypeError(f"{path}: {value!r} is not one of {list(typing.get_args(hint))}")
        return value
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"{path}: expected a sequence, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return [_encode(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)]
        if len(value) != len(args):
            raise TypeError(f"{path}: expected {len(args)} values, got {value!r}")
        return [_encode(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True))]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if type(value) is not hint:
            raise TypeError(f"{path}: expected a {hint.__name__}, got {value!r}")
        return {camel(f.name): _encode(getattr(value, f.name), t, f"{path}.{f.name}") for f, t in _fields(hint)}
    if hint in (StructType, DataType):
        if not isinstance(value, hint):
            raise TypeError(f"{path}: expected a {hint.__name__}, got {value!r}")
        return value.jsonValue()
    base = getattr(hint, "__supertype__", hint)  # a NewType's base
    # bool is an int in Python; neither stands in for the other here
    if base in (str, bool, int) and type(value) is base:
        return value
    raise TypeError(f"{path}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


def _fields(spec_type: type) -> list[tuple[dataclasses.Field, Any]]:
    hints = _hints(spec_type)
    return [(f, hints[f.name]) for f in dataclasses.fields(spec_type)]


def encode(spec: Any) -> str:
    """``spec`` (one of :data:`SPECS`) as the JSON its Scala twin's decoder reads.

    Raises:
        TypeError: a value that does not have its field's type, naming the field.
    """
    if type(spec) not in SPECS:
        raise TypeError(f"{spec!r} is not an operator spec of streamjoin.contract")
    return json.dumps(_encode(spec, type(spec), type(spec).__name__))


# --- the Scala twin -------------------------------------------------------------------------------------------

SCALA_FILE = Path(__file__).resolve().parents[1] / (
    "jvm/operators/src/main/scala/streamjoin/operators/OperatorSpecs.scala"
)


def _scala_type(hint: Any) -> str:
    inner = _is_optional(hint)
    if inner is not None:
        return f"Option[{_scala_type(inner)}]"
    origin = typing.get_origin(hint)
    if origin is Literal:
        return "String"
    if origin is tuple:
        return f"Seq[{_scala_type(typing.get_args(hint)[0])}]"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint.__name__
    if hint is Position:
        return "Int"
    return {str: "String", bool: "Boolean", int: "Long", StructType: "StructType", DataType: "DataType"}[hint]


def _scala_decoder(hint: Any, node: str, path: str) -> str:
    inner = _is_optional(hint)
    if inner is not None:
        return f"SpecCodec.option({node})(n => {_scala_decoder(inner, 'n', path)})"
    origin = typing.get_origin(hint)
    if origin is Literal:
        values = ", ".join(json.dumps(v) for v in typing.get_args(hint))
        return f'SpecCodec.oneOf({node}, "{path}", Seq({values}))'
    if origin is tuple:
        args = typing.get_args(hint)
        size = -1 if len(args) == 2 and args[1] is Ellipsis else len(args)
        return f'SpecCodec.seq({node}, "{path}", {size})(n => {_scala_decoder(args[0], "n", path + "[]")})'
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return f"{hint.__name__}.decode({node})"
    if hint is Position:
        return f'SpecCodec.int({node}, "{path}")'
    name = {str: "string", bool: "bool", int: "long", StructType: "structType", DataType: "dataType"}[hint]
    return f'SpecCodec.{name}({node}, "{path}")'


def _scaladoc(spec_type: type) -> list[str]:
    doc = (spec_type.__doc__ or "").strip().splitlines()[0].replace("``", "`")
    return [f"/** {doc} */"]


def scala_source() -> str:
    """The Scala twin of :data:`SPECS` and :data:`CONSTANTS`: ``OperatorSpecs.scala``'s text."""
    out = [
        "// Generated by `python -m streamjoin.contract` from streamjoin/contract.py (make operator-specs): do not",
        "// edit; tests/test_contract.py fails when this file and the Python specs differ.",
        "package streamjoin.operators",
        "",
        "import com.fasterxml.jackson.databind.JsonNode",
        "import org.apache.spark.sql.types.{DataType, StructType}",
        "",
        "/** The constants both engines use (`streamjoin.contract.CONSTANTS`). */",
        "object Contract {",
    ]
    out += [f"  val {name} = {json.dumps(value)}" for name, value in CONSTANTS.items()]
    out += ["}", ""]
    for spec_type in SPECS:
        name = spec_type.__name__
        fields = _fields(spec_type)
        out += _scaladoc(spec_type)
        out.append(f"final case class {name}(")
        out += [
            f"    {camel(f.name)}: {_scala_type(t)}{',' if i < len(fields) - 1 else ''}"
            for i, (f, t) in enumerate(fields)
        ]
        out += [")", "", f"object {name} {{"]
        keys = ", ".join(f'"{camel(f.name)}"' for f, _ in fields)
        out += [
            f"  val fields: Seq[String] = Seq({keys})",
            "",
            f"  def decode(json: String): {name} = decode(SpecCodec.parse(json))",
            "",
            f"  def decode(node: JsonNode): {name} = {{",
            f'    SpecCodec.requireFields(node, "{name}", fields)',
            f"    {name}(",
        ]
        out += [
            f"      {camel(f.name)} = "
            f"{_scala_decoder(t, f'node.get({json.dumps(camel(f.name))})', f'{name}.{camel(f.name)}')}"
            f"{',' if i < len(fields) - 1 else ''}"
            for i, (f, t) in enumerate(fields)
        ]
        out += ["    )", "  }", "}", ""]
    out += [
        "/** Each spec type's decoder, by its class: what `Operators` builds a logic's spec with. */",
        "object OperatorSpecs {",
        "  val decoders: Map[Class[_], String => AnyRef] = Map(",
    ]
    out += [
        f"    classOf[{t.__name__}] -> ((json: String) => {t.__name__}.decode(json)){',' if i < len(SPECS) - 1 else ''}"
        for i, t in enumerate(SPECS)
    ]
    out += ["  )", "}", ""]
    return "\n".join(out)


def _check_scala_names() -> None:
    for spec_type in SPECS:
        for f, _ in _fields(spec_type):
            if not re.fullmatch(r"[a-z][a-z0-9_]*", f.name):
                raise ValueError(f"{spec_type.__name__}.{f.name}: spec fields are snake_case")


def main(argv: list[str]) -> int:
    """``python -m streamjoin.contract``: write the Scala twin (``--check``: exit 1 when it is stale)."""
    _check_scala_names()
    text = scala_source()
    if argv[1:] == ["--check"]:
        stale = not SCALA_FILE.exists() or SCALA_FILE.read_text() != text
        if stale:
            print(f"{SCALA_FILE} is stale: run `make operator-specs`", file=sys.stderr)
        return int(stale)
    SCALA_FILE.write_text(text)
    print(f"wrote {SCALA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
