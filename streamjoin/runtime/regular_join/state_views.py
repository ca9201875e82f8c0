"""The three state layouts of the regular join, behind one small interface (docs/semantics.md §2).

Mirrors Flink's ``JoinRecordStateViews`` / ``OuterJoinRecordStateViews``: what one
side of the join keeps for one join key is chosen from what is known of the
input's unique key.

=========================  ==========================  ================================  ======  ======
layout                     when                        entries per join key              update  lookup
=========================  ==========================  ================================  ======  ======
JoinKeyContainsUniqueKey   join key ⊇ unique key       one: ``() → (*row, assoc)``       O(1)    O(1)
InputSideHasUniqueKey      unique key not in join key  ``unique key → (*row, assoc)``    O(1)    O(n)
InputSideHasNoUniqueKey    no unique key               ``row → (count, assoc)``          O(1)    O(n)
=========================  ==========================  ================================  ======  ======

``assoc`` is the **association count**: how many rows of the other side the row
matches. Only an outer side (and the left side of SEMI/ANTI) uses it, to know
when its null-padded row must be sent or retracted without rescanning; the
other sides keep 0 there so that all views share one entry shape. Rows are
tuples of column values in the input's column order.

A view reads and writes its entries through a :class:`RecordStore`, the
key-value storage of one side for one join key: :class:`DictRecordStore` in
plain Python, a transformWithState ``ValueState``/``MapState`` on Spark
(``streamjoin.runtime.regular_join``). :meth:`JoinRecordStateView.state_schema`
gives the Spark types of a layout's entries.

Retracting a row the state does not hold is ignored, as in Flink: with state
TTL the row may have expired; without it the input retracted a row it never
added.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import ClassVar, Protocol

from pyspark.sql.types import IntegerType, StructField, StructType

from streamjoin.errors import ValidationError

__all__ = [
    "ASSOCIATIONS_FIELD",
    "COUNT_FIELD",
    "DictRecordStore",
    "InputSideHasNoUniqueKey",
    "InputSideHasUniqueKey",
    "JoinKeyContainsUniqueKey",
    "JoinRecordStateView",
    "RecordStore",
    "StateLayout",
    "TwsRecordStore",
    "choose_layout",
    "create_state_view",
    "view_class",
]

#: State field holding the association count (INT).
ASSOCIATIONS_FIELD = "_associations"
#: State field holding how many times an identical row is present (INT), InputSideHasNoUniqueKey only.
COUNT_FIELD = "_count"


class StateLayout(enum.Enum):
    """The three layouts, named as in Flink's ``JoinInputSideSpec``."""

    JOIN_KEY_CONTAINS_UNIQUE_KEY = "JoinKeyContainsUniqueKey"
    INPUT_SIDE_HAS_UNIQUE_KEY = "InputSideHasUniqueKey"
    INPUT_SIDE_HAS_NO_UNIQUE_KEY = "InputSideHasNoUniqueKey"


class RecordStore(Protocol):
    """Key-value entries of one side of the join for the current join key.

    Keys and values are tuples; the layout decides their shape. A store for
    JoinKeyContainsUniqueKey only ever sees the key ``()``.
    """

    def get(self, key: tuple) -> tuple | None: ...

    def put(self, key: tuple, value: tuple) -> None: ...

    def delete(self, key: tuple) -> None: ...

    def items(self) -> Iterable[tuple[tuple, tuple]]: ...


class DictRecordStore:
    """A :class:`RecordStore` in a plain dict (insertion order), for running the join in Python."""

    def __init__(self) -> None:
        self._entries: dict[tuple, tuple] = {}

    def get(self, key: tuple) -> tuple | None:
        return self._entries.get(key)

    def put(self, key: tuple, value: tuple) -> None:
        self._entries[key] = value

    def delete(self, key: tuple) -> None:
        self._entries.pop(key, None)

    def items(self) -> Iterable[tuple[tuple, tuple]]:
        return list(self._entries.items())

    def __len__(self) -> int:
        return len(self._entries)


class JoinRecordStateView(ABC):
    """What one side of the join keeps for one join key (Flink's ``JoinRecordStateView``).

    Args:
        store: the entries of this side for the current join key.
    """

    layout: ClassVar[StateLayout]

    def __init__(self, store: RecordStore) -> None:
        self._store = store

    @abstractmethod
    def add_record(self, row: tuple, associations: int = 0) -> None:
        """Add ``row``, recording that it matches ``associations`` rows of the other side."""

    @abstractmethod
    def retract_record(self, row: tuple) -> None:
        """Remove one occurrence of ``row`` (by unique key where the layout has one)."""

    @abstractmethod
    def records(self) -> list[tuple[tuple, int]]:
        """All rows with their association counts, a row present n times listed n times."""

    @abstractmethod
    def associations(self, row: tuple) -> int:
        """The association count of ``row``; 0 when the state does not hold it (expired)."""

    @abstractmethod
    def update_associations(self, row: tuple, associations: int) -> None:
        """Set the association count of ``row`` (re-adding it once if it had expired, as Flink does)."""

    @classmethod
    @abstractmethod
    def state_schema(cls, row_schema: StructType, unique_key: Sequence[int]) -> tuple[StructType | None, StructType]:
        """Spark types of this layout's entries.

        Args:
            row_schema: the side's columns.
            unique_key: positions of the unique-key columns (empty when none).

        Returns:
            ``(key_schema, value_schema)``; ``key_schema`` is None for a layout
            with a single entry (a ``ValueState``), else the ``MapState`` key.
        """


def _with_associations(fields: Iterable[StructField]) -> StructType:
    return StructType([*fields, StructField(ASSOCIATIONS_FIELD, IntegerType(), False)])


class JoinKeyContainsUniqueKey(JoinRecordStateView):
    """At most one row per join key: a single entry ``() → (*row, assoc)`` (Flink: ValueState)."""

    layout = StateLayout.JOIN_KEY_CONTAINS_UNIQUE_KEY

    def add_record(self, row: tuple, associations: int = 0) -> None:
        self._store.put((), (*row, associations))

    def retract_record(self, row: tuple) -> None:
        self._store.delete(())

    def records(self) -> list[tuple[tuple, int]]:
        value = self._store.get(())
        return [] if value is None else [(value[:-1], value[-1])]

    def associations(self, row: tuple) -> int:
        value = self._store.get(())
        return 0 if value is None else value[-1]

    def update_associations(self, row: tuple, associations: int) -> None:
        self._store.put((), (*row, associations))

    @classmethod
    def state_schema(cls, row_schema: StructType, unique_key: Sequence[int]) -> tuple[StructType | None, StructType]:
        return None, _with_associations(row_schema.fields)


class InputSideHasUniqueKey(JoinRecordStateView):
    """Rows by unique key: ``unique key → (*row, assoc)`` (Flink: MapState<UK, Record>).

    Args:
        store: the entries of this side for the current join key.
        unique_key: positions of the unique-key columns in a row.
    """

    layout = StateLayout.INPUT_SIDE_HAS_UNIQUE_KEY

    def __init__(self, store: RecordStore, unique_key: Sequence[int]) -> None:
        super().__init__(store)
        if not unique_key:
            raise ValidationError("InputSideHasUniqueKey needs a non-empty unique key")
        self._unique_key = tuple(unique_key)

    def _key(self, row: tuple) -> tuple:
        return tuple(row[i] for i in self._unique_key)

    def add_record(self, row: tuple, associations: int = 0) -> None:
        self._store.put(self._key(row), (*row, associations))

    def retract_record(self, row: tuple) -> None:
        self._store.delete(self._key(row))

    def records(self) -> list[tuple[tuple, int]]:
        return [(value[:-1], value[-1]) for _, value in self._store.items()]

    def associations(self, row: tuple) -> int:
        value = self._store.get(self._key(row))
        return 0 if value is None else value[-1]

    def update_associations(self, row: tuple, associations: int) -> None:
        self._store.put(self._key(row), (*row, associations))

    @classmethod
    def state_schema(cls, row_schema: StructType, unique_key: Sequence[int]) -> tuple[StructType | None, StructType]:
        return StructType([row_schema.fields[i] for i in unique_key]), _with_associations(row_schema.fields)


class InputSideHasNoUniqueKey(JoinRecordStateView):
    """Rows with their number of occurrences: ``row → (count, assoc)`` (Flink: MapState<Record, count>).

    Identical rows match the same rows of the other side, so they share one
    association count.
    """

    layout = StateLayout.INPUT_SIDE_HAS_NO_UNIQUE_KEY

    def add_record(self, row: tuple, associations: int = 0) -> None:
        value = self._store.get(row)
        self._store.put(row, (1 if value is None else value[0] + 1, associations))

    def retract_record(self, row: tuple) -> None:
        value = self._store.get(row)
        if value is None:
            return
        if value[0] > 1:
            self._store.put(row, (value[0] - 1, value[1]))
        else:
            self._store.delete(row)

    def records(self) -> list[tuple[tuple, int]]:
        return [(row, associations) for row, (count, associations) in self._store.items() for _ in range(count)]

    def associations(self, row: tuple) -> int:
        value = self._store.get(row)
        return 0 if value is None else value[1]

    def update_associations(self, row: tuple, associations: int) -> None:
        value = self._store.get(row)
        self._store.put(row, (1 if value is None else value[0], associations))

    @classmethod
    def state_schema(cls, row_schema: StructType, unique_key: Sequence[int]) -> tuple[StructType | None, StructType]:
        return StructType(row_schema.fields), StructType(
            [StructField(COUNT_FIELD, IntegerType(), False), StructField(ASSOCIATIONS_FIELD, IntegerType(), False)]
        )


_VIEWS: dict[StateLayout, type[JoinRecordStateView]] = {
    view.layout: view for view in (JoinKeyContainsUniqueKey, InputSideHasUniqueKey, InputSideHasNoUniqueKey)
}


def choose_layout(join_key: Sequence[int], unique_key: Sequence[int] | None) -> StateLayout:
    """Pick the layout from the input's declared unique key (Flink's ``JoinInputSideSpec``).

    Args:
        join_key: positions of the side's equi-join columns (empty without an equi condition).
        unique_key: positions of a unique key of the side, or None/empty when none is known.

    Returns:
        JoinKeyContainsUniqueKey when ``join_key ⊇ unique_key``, InputSideHasUniqueKey
        for another unique key, else InputSideHasNoUniqueKey.

    Example:
        >>> choose_layout([0], [0]).value, choose_layout([1], [0]).value, choose_layout([0], None).value
        ('JoinKeyContainsUniqueKey', 'InputSideHasUniqueKey', 'InputSideHasNoUniqueKey')
    """
    if not unique_key:
        return StateLayout.INPUT_SIDE_HAS_NO_UNIQUE_KEY
    if set(unique_key) <= set(join_key):
        return StateLayout.JOIN_KEY_CONTAINS_UNIQUE_KEY
    return StateLayout.INPUT_SIDE_HAS_UNIQUE_KEY


def view_class(layout: StateLayout) -> type[JoinRecordStateView]:
    """The view class implementing ``layout``."""
    return _VIEWS[layout]


def create_state_view(store: RecordStore, layout: StateLayout, unique_key: Sequence[int] | None) -> JoinRecordStateView:
    """Build the view of ``layout`` over ``store`` (Flink's ``JoinRecordStateViews.create``).

    Args:
        store: the side's entries for the current join key.
        layout: from :func:`choose_layout`.
        unique_key: positions of the unique-key columns (used by InputSideHasUniqueKey).

    Returns:
        A :class:`JoinRecordStateView`.
    """
    if layout is StateLayout.INPUT_SIDE_HAS_UNIQUE_KEY:
        return InputSideHasUniqueKey(store, unique_key or ())
    return _VIEWS[layout](store)


class TwsRecordStore:
    """A :class:`RecordStore` over a transformWithState state variable, for the current grouping key.

    Reads the whole variable once (one call to Spark's state server), keeps changes in
    memory and writes each changed entry in :meth:`flush`; a new store is opened for every
    grouping key of every micro-batch. State TTL is the variable's: an entry expires ``ttl``
    after its last write.

    :meth:`items` lists the entries in the state's order (Spark's RocksDB state store: by
    the keys' encoding), an entry added during the visit in its place: after such an
    addition the store writes its changes and lists the variable again, so that a row's
    matches come in the same order whatever the micro-batch holds (the jvm engine's
    ``JoinSideStore`` sorts them in that order instead).

    Args:
        state: a ``ValueState`` (JoinKeyContainsUniqueKey, key ``()``) or a ``MapState``.
        is_map: which of the two ``state`` is.
    """

    def __init__(self, state, is_map: bool) -> None:
        self._state = state
        self._is_map = is_map
        self._entries: dict[tuple, tuple | None] | None = None
        self._dirty: set[tuple] = set()
        self._appended = False  # a key added since the variable was listed

    def _load(self) -> dict[tuple, tuple | None]:
        if self._entries is None:
            if self._is_map:
                self._entries = {tuple(k): tuple(v) for k, v in self._state.iterator()}
            else:
                value = self._state.get()
                self._entries = {} if value is None else {(): tuple(value)}
        return self._entries

    def get(self, key: tuple) -> tuple | None:
        return self._load().get(key)

    def put(self, key: tuple, value: tuple) -> None:
        entries = self._load()
        self._appended = self._appended or key not in entries
        entries[key] = value
        self._dirty.add(key)

    def delete(self, key: tuple) -> None:
        entries = self._load()
        if key in entries:
            entries[key] = None
            self._dirty.add(key)

    def items(self) -> Iterable[tuple[tuple, tuple]]:
        if self._appended and self._is_map:
            self.flush()
            self._entries = None
        self._appended = False
        return [(k, v) for k, v in self._load().items() if v is not None]

    def flush(self) -> None:
        """Write every changed entry to the state variable."""
        for key in self._dirty:
            assert self._entries is not None  # loaded by the change that made the key dirty
            value = self._entries[key]
            if self._is_map:
                if value is None:
                    self._state.removeKey(key)
                else:
                    self._state.updateValue(key, value)
            elif value is None:
                self._state.clear()
            else:
                self._state.update(value)
        self._dirty.clear()
