"""Aggregate functions shared by OVER aggregation and GROUP BY (docs/semantics.md §5, §6).

Each function follows Flink's built-in one: its result type, its null handling
and, where a changelog or a bounded OVER frame takes values out again, its
retractable variant (Flink's ``*WithRetractAggFunction``):

============== ================================ ===================== ======================================
function       result type (Spark type of)      nulls                 retractable accumulator
============== ================================ ===================== ======================================
COUNT(*)       BIGINT                           counted               count
COUNT(col)     BIGINT                           skipped               count
COUNT_DISTINCT BIGINT                           skipped               value → multiplicity map, count
SUM            the input type; DECIMAL(38, s)   skipped; NULL if none sum, count of values
AVG            the input type (AVG of INT is    skipped; NULL if none sum, count
               INT, truncated toward zero);
               DECIMAL(38, max(6, s))
MIN, MAX       the input type                   skipped               value → multiplicity map, extreme
FIRST_VALUE    the input type                   skipped               values in arrival order
LAST_VALUE     the input type                   skipped               values in arrival order
============== ================================ ===================== ======================================

Integral SUM wraps around on overflow as Java's arithmetic does; AVG of an
integral type sums in BIGINT. DECIMAL AVG divides with HALF_UP rounding.

An accumulator is a plain list of scalars (cheap to store) plus, for the
map-backed functions, a *view*: any ``MutableMapping`` from value to
multiplicity — a ``dict`` in memory, or the operator's MapState on Spark,
so that a group with millions of distinct values does not rewrite them all
on every change (Flink's ``MapView``).
"""

from __future__ import annotations

import decimal
from abc import ABC, abstractmethod
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass

from pyspark.sql.types import (
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
)

from streamjoin.contract import AggregateCallSpec
from streamjoin.errors import StateError, ValidationError

__all__ = [
    "FUNCTIONS",
    "AggregateCall",
    "AggregateFunction",
    "Aggregates",
    "make_function",
    "parse_calls",
    "result_type",
]

#: Aggregate function names accepted in an :class:`AggregateCall`.
FUNCTIONS = ("COUNT", "COUNT_DISTINCT", "SUM", "AVG", "MIN", "MAX", "FIRST_VALUE", "LAST_VALUE")

_INTEGRAL_BITS: dict[type[DataType | None], int] = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}
_NUMERIC = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)
_MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate of an OVER window or a GROUP BY: ``function(column) AS output``.

    Args:
        output: name of the result column.
        function: one of :data:`FUNCTIONS` (case-insensitive; stored upper-case).
        column: the argument column; ``None`` only for ``COUNT`` (``COUNT(*)``).

    Raises:
        ValidationError: for an unknown function or a missing argument.

    Example:
        >>> AggregateCall("maxPrice", "max", "price")
        AggregateCall(output='maxPrice', function='MAX', column='price')
    """

    output: str
    function: str
    column: str | None

    def __post_init__(self) -> None:
        function = str(self.function).upper()
        if function not in FUNCTIONS:
            raise ValidationError(f"unknown aggregate function {self.function!r}; expected one of {list(FUNCTIONS)}")
        object.__setattr__(self, "function", function)
        if self.column is None and function != "COUNT":
            raise ValidationError(f"{function} needs an argument column (only COUNT may be COUNT(*)): {self.output!r}")
        if not self.output:
            raise ValidationError(f"aggregate {function}({self.column}) needs a non-empty output name")


def parse_calls(aggregates: Iterable[AggregateCall | Sequence]) -> tuple[AggregateCall, ...]:
    """Turn ``(output, function, column)`` tuples (or calls) into :class:`AggregateCall` s.

    Raises:
        ValidationError: for a malformed entry, an empty list or a repeated output name.
    """
    calls = []
    for spec in aggregates:
        if isinstance(spec, AggregateCall):
            calls.append(spec)
            continue
        if isinstance(spec, (str, bytes)) or len(spec) != 3:
            raise ValidationError(f"an aggregate is (output_name, function, column); got {spec!r}")
        calls.append(AggregateCall(*spec))
    if not calls:
        raise ValidationError("at least one aggregate is needed")
    names = [c.output for c in calls]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValidationError(f"aggregate output names must be unique; repeated: {repeated}")
    return tuple(calls)


def result_type(function: str, input_type: DataType | None) -> DataType:
    """The Spark type of ``function``'s result over a column of ``input_type`` (None for ``COUNT(*)``), as Flink
    types it (the module's table): the one place it is decided — the functions here, the planner's aggregate rule
    and, through the spec, the jvm engine's functions take it from here.

    Example:
        >>> result_type("SUM", DecimalType(10, 2)), result_type("AVG", DecimalType(10, 2)), result_type("COUNT", None)
        (DecimalType(38,2), DecimalType(38,6), LongType())
    """
    if function in ("COUNT", "COUNT_DISTINCT"):
        return LongType()
    assert input_type is not None, f"{function} aggregates a column"
    if function == "SUM" and isinstance(input_type, DecimalType):
        return DecimalType(_MAX_DECIMAL_PRECISION, input_type.scale)
    if function == "AVG" and isinstance(input_type, DecimalType):
        return DecimalType(_MAX_DECIMAL_PRECISION, max(6, input_type.scale))
    return input_type


class AggregateFunction(ABC):
    """A typed aggregate function: creates, updates and reads accumulators.

    The accumulator is a list of scalars that the methods update in place;
    map-backed functions (``uses_view``) also receive their view.
    """

    #: Whether the function keeps a value → multiplicity view besides its scalars.
    uses_view = False

    def __init__(self, input_type: DataType | None, retractable: bool) -> None:
        self.input_type = input_type
        self.retractable = retractable

    @property
    @abstractmethod
    def result_type(self) -> DataType:
        """Spark type of the result (Flink's result type)."""

    @property
    def _column_type(self) -> DataType:
        """``input_type`` of a function over a column: every one but ``COUNT(*)``."""
        assert self.input_type is not None, f"{type(self).__name__} aggregates a column"
        return self.input_type

    @abstractmethod
    def create(self) -> list:
        """A fresh accumulator (the aggregate of no rows)."""

    @abstractmethod
    def accumulate(self, acc: list, value, view: MutableMapping | None) -> None:
        """Add one input value."""

    def retract(self, acc: list, value, view: MutableMapping | None) -> None:
        """Take back one input value added before.

        Raises:
            StateError: when the function was built without retraction.
        """
        raise StateError(f"{type(self).__name__} was built for insert-only input and cannot retract {value!r}")

    @abstractmethod
    def get_value(self, acc: list, view: MutableMapping | None):
        """The current result."""


class _Count(AggregateFunction):
    """COUNT(col) / COUNT(*): nulls are not counted unless it is COUNT(*)."""

    def __init__(self, input_type, retractable, star: bool) -> None:
        super().__init__(input_type, retractable)
        self.star = star

    @property
    def result_type(self) -> DataType:
        return result_type("COUNT", self.input_type)

    def create(self) -> list:
        return [0]

    def accumulate(self, acc, value, view) -> None:
        if self.star or value is not None:
            acc[0] += 1

    def retract(self, acc, value, view) -> None:
        if self.star or value is not None:
            acc[0] -= 1

    def get_value(self, acc, view):
        return acc[0]


class _CountDistinct(AggregateFunction):
    """COUNT(DISTINCT col): a view value → multiplicity; the count of values with one > 0."""

    uses_view = True

    @property
    def result_type(self) -> DataType:
        return result_type("COUNT_DISTINCT", self.input_type)

    def create(self) -> list:
        return [0]

    def accumulate(self, acc, value, view) -> None:
        if value is not None:
            _add(acc, 0, view, value, 1)

    def retract(self, acc, value, view) -> None:
        if value is not None:
            _add(acc, 0, view, value, -1)

    def get_value(self, acc, view):
        return acc[0]


def _add(acc: list, slot: int, view: MutableMapping, value, delta: int) -> None:
    """Change ``value``'s multiplicity by ``delta``; ``acc[slot]`` counts values whose multiplicity is > 0.

    A multiplicity may go below zero (a retraction arriving before its
    accumulation, as Flink's MapView-based functions tolerate); such a value
    is not counted until it is back above zero.
    """
    before = view.get(value, 0)
    after = before + delta
    if after == 0:
        del view[value]
    else:
        view[value] = after
    acc[slot] += (after > 0) - (before > 0)


def _plus(a, b):
    """``a + b``; DECIMALs in a context wide enough for DECIMAL(38, s) (Python's default keeps 28 digits)."""
    if isinstance(a, decimal.Decimal):
        return _DECIMAL_CONTEXT.add(a, b)
    return a + b


_DECIMAL_CONTEXT = decimal.Context(prec=_MAX_DECIMAL_PRECISION + 10)


def _wrap(value: int, bits: int) -> int:
    """Java two's-complement overflow of an integral type of ``bits`` bits."""
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


class _Sum(AggregateFunction):
    """SUM: NULL over no values; integral sums wrap like Java; DECIMAL(p, s) sums as DECIMAL(38, s)."""

    @property
    def result_type(self) -> DataType:
        return result_type("SUM", self.input_type)

    def create(self) -> list:
        return [None, 0]

    def accumulate(self, acc, value, view) -> None:
        if value is not None:
            acc[0] = value if acc[0] is None else _plus(acc[0], value)
            acc[1] += 1

    def retract(self, acc, value, view) -> None:
        if value is not None:
            acc[0] = -value if acc[0] is None else _plus(acc[0], -value)
            acc[1] -= 1

    def get_value(self, acc, view):
        if acc[1] == 0 or acc[0] is None:
            return None
        bits = _INTEGRAL_BITS.get(type(self.input_type))
        return _wrap(acc[0], bits) if bits else acc[0]


class _Avg(AggregateFunction):
    """AVG: sum / count in the input's type (Flink's ``AvgAggFunction`` family)."""

    @property
    def result_type(self) -> DataType:
        return result_type("AVG", self.input_type)

    def create(self) -> list:
        return [0, 0]

    def accumulate(self, acc, value, view) -> None:
        if value is not None:
            acc[0] = _plus(acc[0], value)
            acc[1] += 1

    def retract(self, acc, value, view) -> None:
        if value is not None:
            acc[0] = _plus(acc[0], -value)
            acc[1] -= 1

    def get_value(self, acc, view):
        total, count = acc
        if count == 0:
            return None
        bits = _INTEGRAL_BITS.get(type(self.input_type))
        if bits:
            # The sum is a BIGINT; Java's long division truncates toward zero.
            total = _wrap(total, 64)
            # An invalid changelog can leave the count negative (retractions of values never added).
            quotient = abs(total) // abs(count)
            return _wrap(quotient if (total >= 0) == (count > 0) else -quotient, bits)
        if isinstance(self.input_type, DecimalType):
            result_type = self.result_type
            assert isinstance(result_type, DecimalType)  # as the input's
            scale = result_type.scale
            with decimal.localcontext() as ctx:
                ctx.prec = _MAX_DECIMAL_PRECISION + 10
                return (decimal.Decimal(total) / count).quantize(
                    decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP
                )
        return total / count


class _Extreme(AggregateFunction):
    """MIN / MAX. Insert-only: the extreme alone. Retractable: Flink's ``MaxWithRetractAggFunction`` /
    ``MinWithRetractAggFunction`` step for step, also on an invalid changelog: a view value →
    multiplicity (a value retracted more often than accumulated keeps a negative one) and the number
    of values whose multiplicity went 0 → 1 and not yet back; the result is NULL when that number is 0.
    An accumulation compares with the extreme before its multiplicity is counted (a value back at 0
    from -1 can become the extreme), and when the extreme's multiplicity drops to 0 the next one is
    the best of every value in the view, negative multiplicities included (docs/semantics.md §1.9)."""

    def __init__(self, input_type, retractable, largest: bool) -> None:
        super().__init__(input_type, retractable)
        self.largest = largest
        self.uses_view = retractable

    @property
    def result_type(self) -> DataType:
        return result_type("MAX", self.input_type)

    def _better(self, a, b) -> bool:
        return a > b if self.largest else a < b

    def create(self) -> list:
        return [None, 0]  # extreme, Flink's mapSize

    def accumulate(self, acc, value, view) -> None:
        if value is None:
            return
        if acc[0] is None or (self.retractable and acc[1] == 0) or self._better(value, acc[0]):
            acc[0] = value
        if self.retractable:
            count = view.get(value, 0) + 1
            if count == 0:
                del view[value]
            else:
                view[value] = count
            if count == 1:
                acc[1] += 1

    def retract(self, acc, value, view) -> None:
        if not self.retractable:
            super().retract(acc, value, view)
        if value is None:
            return
        count = view.get(value, 0) - 1
        if count != 0:
            view[value] = count
            return
        del view[value]
        acc[1] -= 1
        if acc[1] == 0:
            acc[0] = None
        elif value == acc[0]:
            values = list(view)
            acc[0] = (max if self.largest else min)(values) if values else None
            if not values:
                acc[1] = 0

    def get_value(self, acc, view):
        return acc[0] if not self.retractable or acc[1] > 0 else None


class _Positional(AggregateFunction):
    """FIRST_VALUE / LAST_VALUE of the non-null values, in arrival order.

    Retractable (for bounded OVER frames, whose rows leave in arrival order):
    keeps the frame's non-null values and drops the oldest equal one on retraction.
    """

    def __init__(self, input_type, retractable, first: bool) -> None:
        super().__init__(input_type, retractable)
        self.first = first

    @property
    def result_type(self) -> DataType:
        return result_type("FIRST_VALUE", self.input_type)

    def create(self) -> list:
        return []

    def accumulate(self, acc, value, view) -> None:
        if value is None:
            return
        if self.retractable or not acc:
            acc.append(value)
        elif not self.first:
            acc[0] = value

    def retract(self, acc, value, view) -> None:
        if not self.retractable:
            super().retract(acc, value, view)
        if value is not None:
            acc.remove(value)

    def get_value(self, acc, view):
        if not acc:
            return None
        return acc[0] if self.first else acc[-1]


def make_function(call: AggregateCall, input_type: DataType | None, *, retractable: bool) -> AggregateFunction:
    """Build the aggregate function for ``call`` over a column of ``input_type``.

    Args:
        call: the aggregate.
        input_type: Spark type of ``call.column`` (``None`` for ``COUNT(*)``).
        retractable: whether values will be retracted (a changelog input of
            GROUP BY, or a bounded OVER frame).

    Raises:
        ValidationError: when the function does not accept the type (SUM/AVG of a non-number).
    """
    name = call.function
    if name in ("SUM", "AVG") and not isinstance(input_type, _NUMERIC):
        raise ValidationError(f"{name}({call.column}) needs a numeric column; {call.column!r} is {input_type}")
    if name == "COUNT":
        return _Count(input_type, retractable, star=call.column is None)
    if name == "COUNT_DISTINCT":
        return _CountDistinct(input_type, retractable)
    if name == "SUM":
        return _Sum(input_type, retractable)
    if name == "AVG":
        return _Avg(input_type, retractable)
    if name in ("MIN", "MAX"):
        return _Extreme(input_type, retractable, largest=name == "MAX")
    return _Positional(input_type, retractable, first=name == "FIRST_VALUE")


class Aggregates:
    """Several aggregate functions evaluated together over one input row shape.

    Args:
        calls: the aggregates, in output order.
        input_types: column name → Spark type of the input row.
        input_columns: the input row's column names, in order (rows are tuples).
        retractable: see :func:`make_function`.

    Raises:
        ValidationError: when an aggregate names a column the input lacks.

    Example:
        >>> from pyspark.sql.types import IntegerType, StringType
        >>> aggs = Aggregates(parse_calls([("m", "MAX", "v")]), {"k": StringType(), "v": IntegerType()},
        ...                   ["k", "v"], retractable=False)
        >>> acc, views = aggs.create()
        >>> aggs.accumulate(acc, views, aggs.args(("a", 3))); aggs.get_values(acc, views)
        (3,)
    """

    def __init__(
        self,
        calls: Sequence[AggregateCall],
        input_types: dict[str, DataType],
        input_columns: Sequence[str],
        *,
        retractable: bool,
    ) -> None:
        self.calls = tuple(calls)
        positions = {name: i for i, name in enumerate(input_columns)}
        self.functions: list[AggregateFunction] = []
        self.arg_positions: list[int | None] = []
        for call in self.calls:
            if call.column is not None and call.column not in positions:
                raise ValidationError(
                    f"aggregate {call.function}({call.column}) AS {call.output}: no column {call.column!r}; "
                    f"columns are {list(input_columns)}"
                )
            self.arg_positions.append(None if call.column is None else positions[call.column])
            self.functions.append(
                make_function(call, None if call.column is None else input_types[call.column], retractable=retractable)
            )

    @property
    def view_indexes(self) -> list[int]:
        """Positions of the functions that keep a view."""
        return [i for i, f in enumerate(self.functions) if f.uses_view]

    @property
    def result_types(self) -> list[DataType]:
        return [f.result_type for f in self.functions]

    def specs(self) -> tuple[AggregateCallSpec, ...]:
        """The calls as the jvm engine's specs carry them, with their result types."""
        return tuple(
            AggregateCallSpec(function=c.function, column=c.column, result_type=f.result_type)  # type: ignore[arg-type]
            for c, f in zip(self.calls, self.functions, strict=True)
        )

    def create(self) -> tuple[list[list], dict[int, MutableMapping]]:
        """Fresh accumulators and in-memory views (function position → dict)."""
        return [f.create() for f in self.functions], {i: {} for i in self.view_indexes}

    def args(self, row: Sequence) -> tuple:
        """The aggregates' argument values in ``row`` (``None`` for ``COUNT(*)``), in call order."""
        return tuple(None if pos is None else row[pos] for pos in self.arg_positions)

    def accumulate(self, accs: list[list], views: dict[int, MutableMapping], args: Sequence) -> None:
        """Add one row, given as its :meth:`args`."""
        for i, f in enumerate(self.functions):
            f.accumulate(accs[i], args[i], views.get(i))

    def retract(self, accs: list[list], views: dict[int, MutableMapping], args: Sequence) -> None:
        """Take back one row, given as its :meth:`args`."""
        for i, f in enumerate(self.functions):
            f.retract(accs[i], args[i], views.get(i))

    def get_values(self, accs: list[list], views: dict[int, MutableMapping]) -> tuple:
        return tuple(f.get_value(accs[i], views.get(i)) for i, f in enumerate(self.functions))
