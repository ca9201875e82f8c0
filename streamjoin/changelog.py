"""The changelog vocabulary every layer shares (docs/semantics.md §1).

A changelog row is a tuple of column values plus a :class:`RowKind`. On Spark
DataFrames the RowKind travels in the string column :data:`ROWKIND_COLUMN`
(``"+I"``, ``"-U"``, ``"+U"``, ``"-D"``, Flink's short strings) and the order of
the changes inside one micro-batch in the column :data:`SEQ_COLUMN` (smaller first):
a source numbers its changes with a LONG, and every operator's change carries a
BINARY path, its cause's ``_seq`` followed by its own index (:func:`seq_root`,
docs/semantics.md §1).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamjoin.errors import ChangelogError, ValidationError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "ROWKIND_COLUMN",
    "SEQ_COLUMN",
    "ChangelogError",
    "ChangelogMode",
    "RowKind",
    "materialize",
    "materialize_upsert",
    "seq_root",
    "with_seq_path",
]

#: Column carrying the RowKind short string on every changelog DataFrame.
ROWKIND_COLUMN = "_rowkind"
#: Column carrying the position of a change inside its micro-batch (LONG at a source, BINARY after an operator).
SEQ_COLUMN = "_seq"


def seq_root(column: Column) -> Column:
    """A source's LONG ``_seq`` (``column``, non-negative) as the 8-byte big-endian root of a ``_seq`` path.

    Unsigned byte order of the roots is the numeric order of the LONGs; an operator's change appends its
    4-byte index to its cause's ``_seq`` (:func:`streamjoin.runtime.processor.child_seq`).
    """
    from pyspark.sql import functions as F

    return F.unhex(F.lpad(F.hex(column), 16, "0"))


def with_seq_path(df: DataFrame) -> DataFrame:
    """``df`` (a changelog DataFrame) with its ``_seq`` as a path: a LONG ``_seq`` becomes its :func:`seq_root`.

    Operators take either (a source's LONG, another operator's BINARY) and always emit BINARY.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    if isinstance(df.schema[SEQ_COLUMN].dataType, BinaryType):
        return df
    return df.withColumn(SEQ_COLUMN, seq_root(F.col(SEQ_COLUMN)))


class RowKind(enum.Enum):
    """Kind of change a row represents, as Flink's ``org.apache.flink.types.RowKind``.

    The value is Flink's short string, used on the wire and in Delta tables.
    """

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"

    @property
    def short(self) -> str:
        return self.value

    @property
    def is_accumulate(self) -> bool:
        """``+I`` and ``+U`` add a row to the materialised result."""
        return self in (RowKind.INSERT, RowKind.UPDATE_AFTER)

    @property
    def is_retract(self) -> bool:
        """``-U`` and ``-D`` remove a row from the materialised result."""
        return not self.is_accumulate

    @classmethod
    def from_short(cls, short: str) -> RowKind:
        """Parse ``"+I"``/``"-U"``/``"+U"``/``"-D"``.

        Raises:
            ChangelogError: naming the bad value and the allowed ones.
        """
        try:
            return _BY_SHORT[short]
        except KeyError:
            raise ChangelogError(f"unknown RowKind {short!r}; expected one of {sorted(_BY_SHORT)}") from None


_BY_SHORT = {k.value: k for k in RowKind}


@dataclass(frozen=True)
class ChangelogMode:
    """The set of RowKinds a stream may contain (Flink's ``ChangelogMode``).

    ``keys`` is the upsert key (column names) for upsert mode, empty otherwise.
    Printed as Flink's EXPLAIN does: ``[I,UB,UA,D]``.
    """

    kinds: frozenset[RowKind]
    keys: tuple[str, ...] = ()

    @classmethod
    def insert_only(cls) -> ChangelogMode:
        return cls(frozenset({RowKind.INSERT}))

    @classmethod
    def upsert(cls, keys: Sequence[str]) -> ChangelogMode:
        """Flink's upsert mode ``[I,UA,D]`` keyed by ``keys``. Raises ValidationError for an empty key."""
        if not keys:
            raise ValidationError("an upsert changelog needs a non-empty upsert key")
        return cls(frozenset({RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.DELETE}), tuple(keys))

    @classmethod
    def all(cls) -> ChangelogMode:
        return cls(frozenset(RowKind))

    @property
    def is_insert_only(self) -> bool:
        return self.kinds == {RowKind.INSERT}

    @property
    def has_updates(self) -> bool:
        return bool(self.kinds & {RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER})

    @property
    def has_deletes(self) -> bool:
        return RowKind.DELETE in self.kinds

    def __str__(self) -> str:
        names = {RowKind.INSERT: "I", RowKind.UPDATE_BEFORE: "UB", RowKind.UPDATE_AFTER: "UA", RowKind.DELETE: "D"}
        return "[" + ",".join(names[k] for k in RowKind if k in self.kinds) + "]"


def materialize(changes: Iterable[tuple[RowKind, tuple]]) -> Counter:
    """Materialise a changelog as a multiset of rows (docs/semantics.md §1).

    ``+I``/``+U`` add one occurrence of the row, ``-U``/``-D`` remove one.

    Args:
        changes: ``(RowKind, row)`` pairs in changelog order; rows are hashable tuples.

    Returns:
        ``Counter`` mapping row → number of occurrences (> 0).

    Raises:
        ChangelogError: when a retraction removes a row that is not present,
            which means the producer emitted a malformed changelog.
    """
    result: Counter = Counter()
    for position, (kind, row) in enumerate(changes):
        if kind.is_accumulate:
            result[row] += 1
        else:
            if result[row] <= 0:
                raise ChangelogError(f"change #{position} {kind.short}{list(row)} retracts a row that is not present")
            result[row] -= 1
            if result[row] == 0:
                del result[row]
    return result


def materialize_upsert(changes: Iterable[tuple[RowKind, tuple]], key: Sequence[int]) -> dict[Hashable, tuple]:
    """Materialise a changelog by key, as an upsert sink does (docs/semantics.md §7).

    ``+I``/``+U`` upsert the row under its key, ``-U``/``-D`` delete the key.

    Args:
        changes: ``(RowKind, row)`` pairs in changelog order.
        key: positions of the primary-key columns in each row.

    Returns:
        dict key tuple → row.
    """
    result: dict[Hashable, tuple] = {}
    for kind, row in changes:
        k = tuple(row[i] for i in key)
        if kind.is_accumulate:
            result[k] = row
        else:
            result.pop(k, None)
    return result
