"""The catalog: tables declared by ``CREATE TABLE`` and views declared by ``CREATE [TEMPORARY] VIEW``.

A table is a Kafka topic (``'connector' = 'kafka'`` or ``'upsert-kafka'``, a source), a Delta table
(``'connector' = 'delta'``, a sink or the current rows of a lookup join) or an
in-memory table whose rows a test case supplies (``'connector' = 'values'``,
Flink's test connector). Its declaration is checked here, before anything runs:
column names, types, the ``WATERMARK FOR`` clause, the ``PRIMARY KEY … NOT
ENFORCED`` and the ``WITH`` options.

``CREATE TABLE t (…) WITH (…) LIKE s (options)`` derives ``t`` from table ``s`` as Flink's
``MergeTableLikeUtil``: ``s``'s columns first, then ``t``'s; per feature (``CONSTRAINTS``,
``GENERATED``, ``OPTIONS``, ``WATERMARKS``, or ``ALL``) ``INCLUDING`` takes ``s``'s (a duplicate
is an error), ``EXCLUDING`` leaves it out, ``OVERWRITING`` takes it with ``t``'s winning.
Defaults: ``OVERWRITING OPTIONS``, ``INCLUDING`` the rest.

The connectors and their options are checked by :mod:`streamjoin.planner.connectors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql.types import StructField, StructType
from sqlglot import exp

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
from streamjoin.connectors.kafka import KafkaSource
from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner import connectors
from streamjoin.planner.diagnostics import SqlSource, error
from streamjoin.planner.dialect import Flink, interval_ms
from streamjoin.planner.types import SqlType, sql_type

__all__ = ["Catalog", "Column", "TableDef", "ViewDef", "Watermark", "table_from_ddl"]

_RESERVED = (ROWKIND_COLUMN, SEQ_COLUMN)
_LIKE_FEATURES = ("ALL", "CONSTRAINTS", "DISTRIBUTION", "GENERATED", "METADATA", "OPTIONS", "PARTITIONS", "WATERMARKS")
_LIKE_NOT_OVERWRITING = ("ALL", "CONSTRAINTS", "PARTITIONS")
_LIKE_DEFAULTS = {feature: "INCLUDING" for feature in _LIKE_FEATURES if feature != "ALL"} | {"OPTIONS": "OVERWRITING"}


@dataclass(frozen=True)
class Column:
    """A table column: physical, or computed (``pt AS PROCTIME()``, ``total AS price * qty``)."""

    name: str
    type: SqlType | None  # None: a computed column other than PROCTIME(), typed by the planner
    computed: exp.Expr | None = None
    node: exp.Expr | None = field(default=None, compare=False, repr=False)

    @property
    def declared_type(self) -> SqlType:
        """The type of a physical column or of a ``PROCTIME()`` one.

        Raises:
            ValueError: for a computed column, which the planner types from its expression.
        """
        if self.type is None:
            raise ValueError(f"column '{self.name}' is computed: the planner types it from its expression")
        return self.type


@dataclass(frozen=True)
class Watermark:
    """``WATERMARK FOR column AS column - INTERVAL …``: the rowtime and its delay in milliseconds."""

    column: str
    delay_ms: int


@dataclass(frozen=True)
class TableDef:
    """A declared table.

    Args:
        name: table name (case-sensitive, as Flink).
        columns: columns in declaration order; the rowtime column's type carries ``time_attribute="ROWTIME"``,
            a ``PROCTIME()`` column's ``"PROCTIME"``.
        primary_key: ``PRIMARY KEY (…) NOT ENFORCED`` columns, empty if none.
        watermark: the rowtime and its watermark delay, ``None`` if none.
        options: the ``WITH`` options.
        source: the SQL text it was declared in; node: its ``CREATE TABLE``.
        partition_keys: ``PARTITIONED BY (…)`` columns, empty if none (a Delta sink is written partitioned by
            them; a DATE one makes the pipeline backfillable per day, :mod:`streamjoin.backfill`).
    """

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    watermark: Watermark | None = None
    options: dict[str, str] = field(default_factory=dict)
    source: SqlSource | None = field(default=None, compare=False, repr=False)
    node: exp.Expr | None = field(default=None, compare=False, repr=False)
    partition_keys: tuple[str, ...] = ()

    @property
    def connector(self) -> str:
        """``kafka``, ``upsert-kafka``, ``delta`` or ``values``."""
        return self.options["connector"]

    @property
    def physical_columns(self) -> tuple[Column, ...]:
        """The columns the connector reads or writes (not computed), in declaration order."""
        return tuple(c for c in self.columns if c.computed is None)

    @property
    def physical_schema(self) -> StructType:
        """The physical columns as Spark fields (what the connector reads), all nullable: a source may
        deliver nulls anywhere (a null primary key is the connector's dead letter, not Spark's assumption)."""
        return StructType([StructField(c.name, c.declared_type.spark, True) for c in self.physical_columns])

    def column(self, name: str) -> Column | None:
        """The column called ``name``, or ``None``."""
        return next((c for c in self.columns if c.name == name), None)

    @property
    def rowtime(self) -> str | None:
        """The ``WATERMARK FOR`` column, or ``None``."""
        return self.watermark.column if self.watermark else None

    @property
    def proctime(self) -> str | None:
        """The ``PROCTIME()`` column, or ``None``."""
        return next((c.name for c in self.columns if c.type and c.type.time_attribute == "PROCTIME"), None)

    @property
    def source_kinds(self) -> frozenset[RowKind]:
        """The RowKinds this table produces as a source (its ``changelogMode``).

        See :func:`streamjoin.planner.connectors.source_kinds`.
        """
        return connectors.source_kinds(self.options)

    def kafka_source(self) -> KafkaSource:
        """The :class:`~streamjoin.connectors.kafka.KafkaSource` of a ``kafka`` or ``upsert-kafka`` table
        (:func:`streamjoin.planner.connectors.kafka_source`)."""
        return connectors.kafka_source(self)


@dataclass(frozen=True)
class ViewDef:
    """``CREATE [TEMPORARY] VIEW name AS query``: planned inline wherever it is used, as Flink does."""

    name: str
    query: exp.Expr
    source: SqlSource | None = field(default=None, compare=False, repr=False)


class Catalog:
    """Tables and views by name (case-sensitive); a name is declared once.

    Example:
        >>> catalog = Catalog()
        >>> catalog.add_table(table)  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.tables: dict[str, TableDef] = {}
        self.views: dict[str, ViewDef] = {}

    def _check_new(self, name: str, source: SqlSource | None, node: exp.Expr | None) -> None:
        if name in self.tables or name in self.views:
            raise error(ValidationError, source, node, f"table or view '{name}' is already declared", "unique-names")

    def add_table(self, table: TableDef) -> None:
        """Declare ``table``. Raises ValidationError when the name is taken."""
        self._check_new(table.name, table.source, table.node)
        self.tables[table.name] = table

    def add_view(self, view: ViewDef) -> None:
        """Declare ``view``. Raises ValidationError when the name is taken."""
        self._check_new(view.name, view.source, view.query)
        self.views[view.name] = view


def _option_value(value: exp.Expr, source: SqlSource) -> str:
    if isinstance(value, exp.Literal) and value.is_string:
        return value.name
    raise error(
        ValidationError, source, value, f"option value {value.sql(Flink)} must be a string literal", "table-options"
    )


def _watermark(
    constraint: exp.WatermarkColumnConstraint, columns: dict[str, Column], table: str, source: SqlSource
) -> Watermark:
    column = constraint.this.name
    if column not in columns:
        raise error(
            ValidationError,
            source,
            constraint.this,
            f"WATERMARK FOR '{column}': table '{table}' has no such column; columns: {', '.join(columns)}",
            "watermark-column",
        )
    column_type = columns[column].type
    # A computed rowtime is typed by the planner, which checks it there.
    if column_type is not None and (
        column_type.root not in ("TIMESTAMP", "TIMESTAMP_LTZ")
        or column_type.precision is None
        or column_type.precision > 3
    ):
        raise error(
            ValidationError,
            source,
            constraint.this,
            f"WATERMARK FOR '{column}' of table '{table}': the rowtime must be TIMESTAMP(p) or TIMESTAMP_LTZ(p) "
            f"with p <= 3, but it is {column_type}",
            "watermark-type",
        )
    strategy = constraint.expression
    delay = None
    if isinstance(strategy, exp.Column) and strategy.name == column:
        delay = 0
    elif isinstance(strategy, exp.Sub) and isinstance(strategy.this, exp.Column) and strategy.this.name == column:
        try:
            delay = interval_ms(strategy.expression)
        except ValidationError as e:
            raise error(ValidationError, source, strategy.expression, str(e), "watermark-strategy") from None
    if delay is None or delay < 0:
        raise error(
            UnsupportedPlanError,
            source,
            strategy,
            f"watermark strategy {strategy.sql(Flink)} of table '{table}' is not supported: "
            f"use '{column}' or '{column} - INTERVAL ...' (a bounded out-of-orderness delay >= 0)",
            "watermark-strategy",
        )
    return Watermark(column, delay)


@dataclass(frozen=True)
class _Like:
    """A ``LIKE`` clause: the source table and the merging strategy of each feature."""

    table: TableDef
    strategies: dict[str, str]

    def takes(self, feature: str) -> bool:
        return self.strategies[feature] != "EXCLUDING"

    def message(self, what: str, feature: str) -> str:
        overwriting = "" if feature in _LIKE_NOT_OVERWRITING else f" or OVERWRITING {feature}"
        return f"{what}; specify EXCLUDING {feature}{overwriting}"


def _like(create: exp.Create, name: str, tables: Mapping[str, TableDef], source: SqlSource) -> _Like | None:
    properties = create.args.get("properties")
    clause = next((p for p in properties.expressions if isinstance(p, exp.LikeProperty)), None) if properties else None
    if clause is None:
        return None
    target = clause.this
    if target.args.get("db") or target.args.get("catalog"):
        raise error(
            UnsupportedPlanError,
            source,
            target,
            f"catalog/database qualified names are not supported: {target.sql(Flink)}",
            "table-exists",
        )
    if target.name not in tables:
        known = ", ".join(tables) or "none"
        raise error(
            ValidationError,
            source,
            target,
            f"table '{name}' is LIKE '{target.name}', which is not a declared table; tables: {known}",
            "like-table",
        )
    strategies = dict(_LIKE_DEFAULTS)
    given = [(o.name, o.text("value")) for o in clause.expressions]
    for strategy, feature in given:
        if feature not in _LIKE_FEATURES:
            raise error(
                ValidationError,
                source,
                clause,
                f"LIKE option {strategy} {feature}: the feature is one of {', '.join(_LIKE_FEATURES)}",
                "like-options",
            )
        if strategy == "OVERWRITING" and feature in _LIKE_NOT_OVERWRITING:
            raise error(
                ValidationError,
                source,
                clause,
                f"LIKE option OVERWRITING {feature} is not allowed: use INCLUDING or EXCLUDING",
                "like-options",
            )
        if [f for _, f in given].count(feature) > 1:
            raise error(
                ValidationError,
                source,
                clause,
                f"LIKE option feature {feature} is given more than once",
                "like-options",
            )
    # ALL sets every feature; a feature named beside it overrides it (Flink's computeMergingStrategies).
    for strategy, feature in sorted(given, key=lambda g: g[1] != "ALL"):
        strategies.update(dict.fromkeys(_LIKE_DEFAULTS, strategy) if feature == "ALL" else {feature: strategy})
    return _Like(tables[target.name], strategies)


def _inherited_columns(like: _Like | None) -> dict[str, Column]:
    """The LIKE table's physical columns, and its computed ones unless GENERATED is excluded, as plain
    columns: the rowtime attribute and NOT NULL of a key come back from the new table's own watermark and key."""
    if like is None:
        return {}
    base = like.table
    return {
        c.name: replace(
            c,
            type=c.type
            and replace(
                c.type,
                time_attribute=None if c.name == base.rowtime else c.type.time_attribute,
                nullable=c.type.nullable or c.name in base.primary_key,
            ),
        )
        for c in base.columns
        if c.computed is None or like.takes("GENERATED")
    }


def _check_overwrite(item: exp.ColumnDef, base: Column, like: _Like, table: str, source: SqlSource) -> None:
    # Only a computed column may replace one of the LIKE table's, and only under OVERWRITING GENERATED.
    computed = any(isinstance(c.kind, exp.ComputedColumnConstraint) for c in item.constraints)
    if computed and base.computed is not None and like.strategies["GENERATED"] == "OVERWRITING":
        return
    message = f"column '{base.name}' of table '{table}' is already declared by its LIKE table '{like.table.name}'"
    if computed and base.computed is not None:
        message = like.message(message, "GENERATED")
    raise error(ValidationError, source, item, message, "unique-columns")


def table_from_ddl(create: exp.Create, source: SqlSource, tables: Mapping[str, TableDef] | None = None) -> TableDef:
    """The :class:`TableDef` of a parsed ``CREATE TABLE`` statement, checked.

    Args:
        create: the statement; its column list may be missing when it has a ``LIKE`` clause.
        source: the text it comes from.
        tables: the tables declared before it, which a ``LIKE`` clause may name.

    Raises:
        ValidationError: for a duplicate or reserved column name, an unsupported type,
            a primary key without ``NOT ENFORCED`` or naming an unknown column, a
            watermark on an unknown or non-timestamp column, an unknown connector,
            format or option, or a missing required option; for a ``LIKE`` clause naming no
            declared table, a bad like option, or a column, watermark, key or option declared
            both here and by the ``LIKE`` table (unless its strategy allows it).
        UnsupportedPlanError: for a watermark strategy other than ``ts`` / ``ts - INTERVAL …``.
    """
    schema = create.this if isinstance(create.this, exp.Schema) else None
    name = (schema.this if schema else create.this).name
    like = _like(create, name, tables or {}, source)
    columns = _inherited_columns(like)
    declared: set[str] = set()
    watermark_node = None
    pk_node = None
    for item in schema.expressions if schema else []:
        if isinstance(item, exp.ColumnDef):
            column_name = item.this.name
            if column_name in declared:
                raise error(
                    ValidationError,
                    source,
                    item,
                    f"column '{column_name}' of table '{name}' is declared twice",
                    "unique-columns",
                )
            declared.add(column_name)
            if column_name in columns:
                assert like is not None  # the columns so far are the LIKE table's
                _check_overwrite(item, columns[column_name], like, name, source)
            if column_name in _RESERVED:
                raise error(
                    ValidationError,
                    source,
                    item,
                    f"column name '{column_name}' of table '{name}' is reserved for the changelog",
                    "reserved-columns",
                )
            computed = next(
                (c.kind for c in item.constraints if isinstance(c.kind, exp.ComputedColumnConstraint)), None
            )
            if computed is not None:
                expr = computed.this
                if isinstance(expr, exp.Anonymous) and expr.name.upper() == "PROCTIME" and not expr.expressions:
                    ctype = SqlType("TIMESTAMP_LTZ", 3, nullable=False, time_attribute="PROCTIME")
                else:
                    ctype = None  # typed by the planner from its expression
                columns[column_name] = Column(column_name, ctype, expr, item)
                continue
            if item.kind is None:
                raise error(
                    ValidationError,
                    source,
                    item,
                    f"column '{column_name}' of table '{name}' has no type",
                    "column-type",
                )
            try:
                ctype = sql_type(item.kind)
            except ValidationError as e:
                raise error(
                    ValidationError, source, item, f"column '{column_name}' of table '{name}': {e}", "column-type"
                ) from None
            not_null = any(isinstance(c.kind, exp.NotNullColumnConstraint) for c in item.constraints)
            columns[column_name] = Column(column_name, ctype.with_nullable(not not_null), None, item)
        elif isinstance(item, exp.WatermarkColumnConstraint):
            if watermark_node is not None:
                raise error(
                    ValidationError, source, item, f"table '{name}' declares more than one WATERMARK", "one-watermark"
                )
            base = like.table.watermark if like and like.takes("WATERMARKS") else None
            if like and base and not (like.strategies["WATERMARKS"] == "OVERWRITING" and base.column == item.this.name):
                message = (
                    f"table '{name}' declares a WATERMARK and its LIKE table '{like.table.name}' "
                    f"has one (on '{base.column}')"
                )
                raise error(ValidationError, source, item, like.message(message, "WATERMARKS"), "one-watermark")
            watermark_node = item
        elif isinstance(item, exp.PrimaryKey):
            if like and like.table.primary_key and like.strategies["CONSTRAINTS"] == "INCLUDING":
                message = f"table '{name}' declares a PRIMARY KEY and its LIKE table '{like.table.name}' has one"
                raise error(ValidationError, source, item, like.message(message, "CONSTRAINTS"), "primary-key-columns")
            pk_node = item
        else:
            raise error(
                UnsupportedPlanError,
                source,
                item,
                f"table '{name}': {item.sql(Flink)} is not supported",
                "table-constraints",
            )
    primary_key: tuple[str, ...] = ()
    if pk_node is not None:
        if not any("NOT ENFORCED" in str(o).upper() for o in pk_node.args.get("options") or []):
            raise error(
                ValidationError,
                source,
                pk_node,
                f"PRIMARY KEY of table '{name}' must be declared NOT ENFORCED: Flink does not own the data, "
                "so the key is a promise about it, not a check",
                "primary-key-not-enforced",
            )
        primary_key = tuple(i.name for i in pk_node.expressions)
        for key_node in pk_node.expressions:
            if key_node.name not in columns or columns[key_node.name].computed is not None:
                raise error(
                    ValidationError,
                    source,
                    key_node,
                    f"PRIMARY KEY column '{key_node.name}' is not a physical column of table '{name}'",
                    "primary-key-columns",
                )
    elif like and like.strategies["CONSTRAINTS"] == "INCLUDING":
        primary_key = like.table.primary_key
    for key in primary_key:
        columns[key] = Column(key, columns[key].declared_type.with_nullable(False), None, columns[key].node)
    watermark = _watermark(watermark_node, columns, name, source) if watermark_node is not None else None
    if watermark is None and like and like.takes("WATERMARKS") and like.table.watermark:
        watermark = like.table.watermark
        if watermark.column not in columns:
            raise error(
                ValidationError,
                source,
                create.this,
                f"table '{name}': the WATERMARK of its LIKE table is on "
                f"'{watermark.column}', which EXCLUDING GENERATED leaves out; specify EXCLUDING WATERMARKS",
                "watermark-column",
            )
    if watermark:
        column = columns[watermark.column]
        columns[watermark.column] = Column(
            column.name,
            column.type
            and SqlType(
                column.type.root, column.type.precision, nullable=column.type.nullable, time_attribute="ROWTIME"
            ),
            column.computed,
            column.node,
        )
    options = _options(create, name, source, like)
    connectors.check_options(options, primary_key, name, source, create.this.this)
    partition_keys = _partition_keys(create, columns, name, source)
    return TableDef(name, tuple(columns.values()), primary_key, watermark, options, source, create, partition_keys)


def _partition_keys(create: exp.Create, columns: dict[str, Column], table: str, source: SqlSource) -> tuple[str, ...]:
    """The ``PARTITIONED BY (…)`` columns: physical columns of the table (Flink's ``SqlCreateTable`` rule)."""
    properties = create.args.get("properties")
    clause = (
        next((p for p in properties.expressions if isinstance(p, exp.PartitionedByProperty)), None)
        if properties
        else None
    )
    if clause is None:
        return ()
    keys = tuple(k.name for k in clause.this.expressions)
    for key, node in zip(keys, clause.this.expressions):
        if key not in columns or columns[key].computed is not None:
            raise error(
                ValidationError,
                source,
                node,
                f"PARTITIONED BY column '{key}' is not a physical column of table "
                f"'{table}'; columns: {', '.join(columns)}",
                "partition-columns",
            )
    return keys


def _options(create: exp.Create, table: str, source: SqlSource, like: _Like | None) -> dict[str, str]:
    properties = create.args.get("properties")
    options = dict(like.table.options) if like and like.takes("OPTIONS") else {}
    for prop in properties.expressions if properties else []:
        if isinstance(prop, (exp.LikeProperty, exp.PartitionedByProperty)):
            continue
        if not (type(prop) is exp.Property and isinstance(prop.this, exp.Literal)):
            raise error(
                ValidationError,
                source,
                prop,
                f"table '{table}': {prop.sql(Flink)} is not a 'key' = 'value' option",
                "table-options",
            )
        key = prop.this.name
        if like and key in like.table.options and like.strategies["OPTIONS"] == "INCLUDING":
            message = (
                f"table '{table}': option '{key}' is also set by its LIKE table '{like.table.name}' "
                f"('{connectors.redact(like.table.options)[key]}')"
            )
            raise error(ValidationError, source, prop, like.message(message, "OPTIONS"), "table-options")
        options[key] = _option_value(prop.args["value"], source)
    return options
