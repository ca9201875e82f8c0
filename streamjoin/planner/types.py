"""Flink SQL data types, as the planner sees them, and their Spark counterparts.

A :class:`SqlType` is a Flink logical type (root, precision, scale,
nullability) plus its **time attribute**: a rowtime (``WATERMARK FOR``) or a
proctime (``PROCTIME()``) column is a ``TIMESTAMP(3) *ROWTIME*`` /
``TIMESTAMP_LTZ(3) *PROCTIME*`` as Flink prints it. On Spark every timestamp is
a ``TimestampType`` in the session time zone (UTC, ``streamjoin.session``).

| Flink | Spark |
| --- | --- |
| TINYINT, SMALLINT, INT, BIGINT | ByteType, ShortType, IntegerType, LongType |
| FLOAT, DOUBLE | FloatType, DoubleType |
| DECIMAL(p, s) (default DECIMAL(10, 0)) | DecimalType(p, s) |
| BOOLEAN | BooleanType |
| CHAR(n), VARCHAR(n), STRING | StringType |
| BINARY(n), VARBINARY(n), BYTES | BinaryType |
| DATE | DateType |
| TIMESTAMP(p) (default 6), TIMESTAMP_LTZ(p) | TimestampType |
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from pyspark.sql import types as T
from sqlglot import exp

from streamjoin.errors import ValidationError
from streamjoin.planner.dialect import Flink

__all__ = ["SqlType", "TimeAttribute", "common_type", "from_spark", "sql_type"]

TimeAttribute = Literal["ROWTIME", "PROCTIME"]

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_APPROX = ("FLOAT", "DOUBLE")
_FAMILIES = {
    **dict.fromkeys((*_INTEGRAL, *_APPROX, "DECIMAL"), "numeric"),
    **dict.fromkeys(("CHAR", "VARCHAR"), "string"),
    **dict.fromkeys(("BINARY", "VARBINARY"), "binary"),
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_LTZ": "timestamp",
    "NULL": "null",
}
_STRING_MAX = 2147483647

# sqlglot type → (Flink root, default precision)
_FROM_SQLGLOT = {
    exp.DType.TINYINT: "TINYINT",
    exp.DType.SMALLINT: "SMALLINT",
    exp.DType.INT: "INT",
    exp.DType.BIGINT: "BIGINT",
    exp.DType.FLOAT: "FLOAT",
    exp.DType.DOUBLE: "DOUBLE",
    exp.DType.DECIMAL: "DECIMAL",
    exp.DType.BOOLEAN: "BOOLEAN",
    exp.DType.CHAR: "CHAR",
    exp.DType.VARCHAR: "VARCHAR",
    exp.DType.TEXT: "VARCHAR",
    exp.DType.BINARY: "BINARY",
    exp.DType.VARBINARY: "VARBINARY",
    exp.DType.DATE: "DATE",
    exp.DType.TIMESTAMP: "TIMESTAMP",
    exp.DType.TIMESTAMPLTZ: "TIMESTAMP_LTZ",
}


@dataclass(frozen=True)
class SqlType:
    """A Flink logical type.

    Args:
        root: ``INT``, ``BIGINT``, ``DECIMAL``, ``VARCHAR``, ``TIMESTAMP``, ... (see the module table), or ``NULL``.
        precision: length / precision (``VARCHAR(n)``, ``DECIMAL(p, s)``, ``TIMESTAMP(p)``), ``None`` when the root
            has none.
        scale: ``DECIMAL`` scale.
        nullable: ``False`` for ``NOT NULL``.
        time_attribute: ``"ROWTIME"`` / ``"PROCTIME"`` for time attributes.
    """

    root: str
    precision: int | None = None
    scale: int | None = None
    nullable: bool = True
    time_attribute: TimeAttribute | None = None

    @property
    def family(self) -> str:
        """What compares with what.

        ``numeric``, ``string``, ``binary``, ``boolean``, ``date``, ``timestamp`` or ``null``.
        """
        return _FAMILIES[self.root]

    @property
    def decimal_digits(self) -> tuple[int, int]:
        """A DECIMAL's ``(precision, scale)``: every DECIMAL the planner makes has both.

        Raises:
            ValueError: for a type without them.
        """
        if self.precision is None or self.scale is None:
            raise ValueError(f"{self.root} has no precision and scale")
        return self.precision, self.scale

    @property
    def is_integral(self) -> bool:
        """TINYINT, SMALLINT, INT or BIGINT."""
        return self.root in _INTEGRAL

    @property
    def spark(self) -> T.DataType:
        """The Spark type that carries values of this type."""
        return {
            "TINYINT": T.ByteType(),
            "SMALLINT": T.ShortType(),
            "INT": T.IntegerType(),
            "BIGINT": T.LongType(),
            "FLOAT": T.FloatType(),
            "DOUBLE": T.DoubleType(),
            "BOOLEAN": T.BooleanType(),
            "CHAR": T.StringType(),
            "VARCHAR": T.StringType(),
            "BINARY": T.BinaryType(),
            "VARBINARY": T.BinaryType(),
            "DATE": T.DateType(),
            "TIMESTAMP": T.TimestampType(),
            "TIMESTAMP_LTZ": T.TimestampType(),
            "NULL": T.NullType(),
        }.get(self.root) or T.DecimalType(*self.decimal_digits)

    def plain(self) -> SqlType:
        """The same type without time attribute (what a regular join or an aggregate makes of a rowtime)."""
        return replace(self, time_attribute=None)

    def with_nullable(self, nullable: bool) -> SqlType:
        """The same type, nullable or ``NOT NULL``."""
        return replace(self, nullable=nullable)

    @property
    def sql(self) -> str:
        """The type as written in Flink DDL, without nullability or time attribute: ``DECIMAL(15, 2)``, ``STRING``."""
        return str(SqlType(self.root, self.precision, self.scale))

    @property
    def display_name(self) -> str:
        """The type as Flink's collected results name it: ``INT``, ``VARCHAR``, ``TIMESTAMP``, ``DECIMAL(10, 2)``."""
        if self.root == "DECIMAL":
            return f"DECIMAL({self.precision}, {self.scale})"
        return "VARCHAR" if self.root in ("CHAR", "VARCHAR") else self.root

    def __str__(self) -> str:
        if self.root == "VARCHAR" and self.precision == _STRING_MAX:
            text = "STRING"
        elif self.root == "DECIMAL":
            text = f"DECIMAL({self.precision}, {self.scale})"
        elif self.precision is not None:
            text = f"{self.root}({self.precision})"
        else:
            text = self.root
        if self.time_attribute:
            text += f" *{self.time_attribute}*"
        return text if self.nullable else text + " NOT NULL"


def sql_type(data_type: exp.DataType) -> SqlType:
    """The :class:`SqlType` of a parsed Flink type (``DECIMAL(15, 2)``, ``TIMESTAMP(3)``, ``STRING NOT NULL``...).

    Raises:
        ValidationError: for types Spark cannot carry here (``TIME``, ``ARRAY``, ``MAP``, ``ROW``, ...).
    """
    root = _FROM_SQLGLOT.get(data_type.this)
    if data_type.this == exp.DType.USERDEFINED and str(data_type.args.get("kind", "")).upper() == "BYTES":
        return SqlType("VARBINARY", _STRING_MAX)
    if root is None:
        raise ValidationError(
            f"data type {data_type.sql(dialect=Flink)} is not supported; supported: "
            "TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), BOOLEAN, CHAR(n), VARCHAR(n), STRING, "
            "BINARY(n), VARBINARY(n), BYTES, DATE, TIMESTAMP(p), TIMESTAMP_LTZ(p)"
        )
    params = [int(p.this.name) for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
    if root == "DECIMAL":
        precision, scale = (params + [10, 0][len(params) :])[:2]
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise ValidationError(f"DECIMAL({precision}, {scale}): precision must be 1..38 and scale 0..precision")
        return SqlType("DECIMAL", precision, scale)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        precision = params[0] if params else 6
        if not 0 <= precision <= 9:
            raise ValidationError(f"{root}({precision}): precision must be 0..9")
        return SqlType(root, precision)
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        if data_type.this == exp.DType.TEXT:
            return SqlType("VARCHAR", _STRING_MAX)
        return SqlType(root, params[0] if params else (1 if root in ("CHAR", "BINARY") else _STRING_MAX))
    return SqlType(root)


def from_spark(data_type: T.DataType) -> SqlType:
    """The Flink type that Spark's ``data_type`` carries (used where only Spark knows the type of an expression).

    Raises:
        ValidationError: for Spark types with no Flink counterpart here.
    """
    simple = {
        T.ByteType: "TINYINT",
        T.ShortType: "SMALLINT",
        T.IntegerType: "INT",
        T.LongType: "BIGINT",
        T.FloatType: "FLOAT",
        T.DoubleType: "DOUBLE",
        T.BooleanType: "BOOLEAN",
        T.DateType: "DATE",
        T.NullType: "NULL",
    }
    for spark_class, root in simple.items():
        if isinstance(data_type, spark_class):
            return SqlType(root)
    if isinstance(data_type, T.DecimalType):
        return SqlType("DECIMAL", data_type.precision, data_type.scale)
    if isinstance(data_type, T.StringType):
        return SqlType("VARCHAR", _STRING_MAX)
    if isinstance(data_type, T.BinaryType):
        return SqlType("VARBINARY", _STRING_MAX)
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        return SqlType("TIMESTAMP", 6)
    raise ValidationError(f"Spark type {data_type.simpleString()} has no Flink SQL counterpart here")


_NUMERIC_ORDER = ("TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL", "FLOAT", "DOUBLE")


def common_type(left: SqlType, right: SqlType) -> SqlType | None:
    """The type both operands of a comparison or arithmetic widen to, or ``None`` if they do not compare.

    Follows Flink's implicit widening within a family (INT + BIGINT → BIGINT,
    INT + DECIMAL → DECIMAL, anything + DOUBLE → DOUBLE); NULL widens to anything.
    """
    if left.family == "null":
        return right
    if right.family == "null":
        return left
    if left.family != right.family:
        return None
    if left.family == "numeric":
        wider = max(left, right, key=lambda t: _NUMERIC_ORDER.index(t.root))
        if wider.root == "DECIMAL" and left.root == right.root == "DECIMAL":
            (left_precision, left_scale), (right_precision, right_scale) = left.decimal_digits, right.decimal_digits
            scale = max(left_scale, right_scale)
            integer = max(left_precision - left_scale, right_precision - right_scale)
            return SqlType("DECIMAL", min(38, integer + scale), scale)
        return wider.plain()
    return left.plain()
