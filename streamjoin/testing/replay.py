"""Replay test cases in the ``flink-cases`` format through the planner and the operators on Spark.

A case (``tests/data/flink-cases/README.md``) declares tables (columns with
Flink types, RowKind-tagged rows, optional primary key, rowtime with watermark
delay, PROCTIME column, changelog mode, arrival-index column), the arrival
order across tables, optional setup SQL (views) and a query. :func:`case_script`
turns the tables into ``CREATE TABLE … WITH ('connector' = 'values')``
statements, so the case is planned exactly like a pipeline file; :func:`replay_cases`
runs the cases as streaming queries of one Spark session (up to
:data:`SHARED_QUERY_CASES` cases without event or processing time to a query, each
with its own sources, operators and state), fed as the README says Flink was fed:

- rows arrive in the ``arrival`` order, ``micro_batch_rows`` arrivals per
  micro-batch (1 by default: each row fully processed before the next);
  ``_seq`` is the global arrival index;
- per table, ``wm(T) = max rowtime seen in T − delay`` after each row; every
  row carries each rowtime table's watermark at its arrival, and an event-time
  operator advances to the minimum of its tables' before the row
  (:mod:`streamjoin.planner.translate`), as Flink's per-record watermarks do;
- Spark has one watermark per query, the minimum over the inputs that declare
  one; it moves the timers of keys that get no row. Flink's operators each
  follow their own inputs' watermarks, so a rowtime table gets Spark's
  watermark only when an event-time operator reads it
  (:func:`~streamjoin.planner.plan.watermarked_tables`): a table that only
  a regular join reads would hold back the timers of an event-time operator
  on another table (case ``dedup_first_rowtime_left_join``);
- Spark's own watermark must neither run ahead of Flink's (Spark ignores an
  input that has seen no row; Flink waits for it) nor stop short at the end
  (Flink ends the input with a +∞ watermark that fires every timer): each
  such table gets an invisible first row at 1970-01-01 and an invisible
  last row at 9000-01-01, which move Spark's watermark and are filtered out
  before any operator; one more empty micro-batch lets the last one fire.

The result of a case is written as ``{"columns": [[name, type]…], "changelog":
[[RowKind, values…]…], "final": [[values…]…]}`` (final = the changelog
materialised as a multiset, sorted), timestamps as ``YYYY-MM-DD HH:MM:SS.fff``,
DECIMALs as strings; a case the planner refuses yields ``{"error": "…"}``.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType, TimestampNTZType, TimestampType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, ChangelogError, RowKind, materialize, with_seq_path
from streamjoin.connectors.changelog_files import read_changelog_files, write_changelog_batches
from streamjoin.connectors.watermark import with_source_watermark
from streamjoin.errors import StreamJoinError, ValidationError
from streamjoin.jvm import engine
from streamjoin.planner.catalog import TableDef
from streamjoin.planner.plan import watermarked_tables
from streamjoin.planner.script import PlannedStatement, Script, plan_script
from streamjoin.planner.translate import Translator
from streamjoin.planner.types import SqlType, from_spark
from streamjoin.sink.collect import collect_changelog

__all__ = ["Case", "case_script", "load_case_file", "replay_case", "replay_cases"]

_ARRIVAL = "_arrival"
_SENTINEL = "_sentinel"
_START = dt.datetime(1970, 1, 1)
_END = dt.datetime(9000, 1, 1)
_MODES = {"insert_only": "I", "all": "I,UB,UA,D", "upsert": "I,UA,D"}
_ATTEMPTS = 3
_CASE = "_case"
#: Cases that share one streaming query in :func:`replay_cases` (those it may share: :func:`_shareable`).
SHARED_QUERY_CASES = 4


@dataclass(frozen=True)
class Case:
    """A test case as read from its JSON file (see the module docstring)."""

    name: str
    tables: list[dict]
    arrival: list[str]
    setup: list[str]
    query: str

    def arrivals(self) -> list[tuple[str, list]]:
        """``(table, row)`` in arrival order; ``row`` is ``[RowKind, values…]``."""
        cursor = {t["name"]: 0 for t in self.tables}
        rows = {t["name"]: t["rows"] for t in self.tables}
        out = []
        for name in self.arrival:
            out.append((name, rows[name][cursor[name]]))
            cursor[name] += 1
        return out


def load_case_file(path: str | Path) -> Case:
    """Read a case file; without ``arrival``, tables arrive one after the other in declaration order.

    Raises:
        ValidationError: for a file that is not a case (missing ``tables`` or ``query``, arrival naming unknown tables
            or more rows than a table has).
    """
    path = Path(path)
    data = json.loads(path.read_text())
    if "tables" not in data or "query" not in data:
        raise ValidationError(f"{path}: a case needs 'tables' and 'query'")
    arrival = data.get("arrival") or [t["name"] for t in data["tables"] for _ in t["rows"]]
    counts = {t["name"]: len(t["rows"]) for t in data["tables"]}
    for name in set(arrival):
        if name not in counts or arrival.count(name) > counts[name]:
            raise ValidationError(f"{path}: arrival names {name!r} {arrival.count(name)} times; tables: {counts}")
    return Case(data.get("name", path.stem), data["tables"], arrival, data.get("setup", []), data["query"])


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def case_script(case: Case) -> str:
    """The case as Flink SQL: one ``CREATE TABLE … ('connector' = 'values')`` per table, the setup, the query."""
    statements = []
    for t in case.tables:
        lines = [f"  {_quote(c)} {ctype}" for c, ctype in t["columns"]]
        if t.get("seq_column"):
            lines.append(f"  {_quote(t['seq_column'])} BIGINT")
        if t.get("proctime"):
            lines.append(f"  {_quote(t['proctime'])} AS PROCTIME()")
        rowtime = t.get("rowtime")
        if rowtime:
            delay = int(rowtime.get("watermark_delay_ms", 0))
            column = _quote(rowtime["column"])
            strategy = f"{column} - INTERVAL '{Decimal(delay) / 1000}' SECOND" if delay else column
            lines.append(f"  WATERMARK FOR {column} AS {strategy}")
        if t.get("primary_key"):
            lines.append(f"  PRIMARY KEY ({', '.join(_quote(k) for k in t['primary_key'])}) NOT ENFORCED")
        mode = t.get("changelog_mode") or ("insert_only" if all(r[0] == "+I" for r in t["rows"]) else "all")
        statements.append(
            f"CREATE TABLE {_quote(t['name'])} (\n"
            + ",\n".join(lines)
            + f"\n) WITH ('connector' = 'values', 'changelog-mode' = '{_MODES[mode]}')"
        )
    statements += list(case.setup)
    statements.append(case.query)
    return ";\n".join(statements) + ";\n"


def _parse_timestamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("T", " "))


def _to_python(value, t: SqlType):
    if value is None:
        return None
    if t.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return _parse_timestamp(value)
    if t.root == "DATE":
        return dt.date.fromisoformat(value)
    if t.root == "DECIMAL":
        return Decimal(str(value))
    if t.family == "numeric" and t.root in ("FLOAT", "DOUBLE"):
        return float(value)
    return value


def _epoch_ms(value: dt.datetime) -> int:
    return int(value.replace(tzinfo=dt.UTC).timestamp() * 1000)


class _Feed:
    """The micro-batches of every table of a case, with arrival index, per-table watermarks and sentinels.

    Args:
        case: the case.
        tables: the catalog's tables.
        micro_batch_rows: arrivals per micro-batch.
        watermarked: the rowtime tables that get Spark's watermark and its sentinels (module docstring);
            by default all.
    """

    def __init__(
        self, case: Case, tables: dict[str, TableDef], micro_batch_rows: int, watermarked: Iterable[str] | None = None
    ):
        self.case = case
        self.tables = tables
        self.rowtime_tables = [t["name"] for t in case.tables if t.get("rowtime")]
        self.watermarked = [n for n in self.rowtime_tables if watermarked is None or n in set(watermarked)]
        self.watermark_columns = {name: f"_wm{i}" for i, name in enumerate(self.rowtime_tables)}
        arrivals = case.arrivals()
        n_batches = -(-len(arrivals) // micro_batch_rows) if arrivals else 0
        # Event time needs two more micro-batches: the +inf watermark's, and one in which it fires timers.
        total = n_batches + (2 if self.watermarked else 0)
        self.batches: dict[str, list[list]] = {t["name"]: [[] for _ in range(total)] for t in case.tables}
        max_seen: dict[str, int] = {}
        for index, (name, row) in enumerate(arrivals):
            table = tables[name]
            raw = next(t for t in case.tables if t["name"] == name)
            values = [_to_python(v, c.declared_type) for v, c in zip(row[1:], table.physical_columns)]
            if raw.get("seq_column"):
                values.append(index)
            watermarks = [(max_seen[w] - self._delay(w)) if w in max_seen else None for w in self.rowtime_tables]
            self.batches[name][index // micro_batch_rows].append((row[0], (*values, index, *watermarks, False)))
            if table.rowtime:
                rowtime = values[[c.name for c in table.physical_columns].index(table.rowtime)]
                if rowtime is not None:
                    max_seen[name] = max(max_seen.get(name, _epoch_ms(rowtime)), _epoch_ms(rowtime))
        for name in self.watermarked:
            self.batches[name][0].insert(0, ("+I", self._sentinel(tables[name], _START)))
            self.batches[name][n_batches].append(("+I", self._sentinel(tables[name], _END)))

    def _delay(self, name: str) -> int:
        watermark = self.tables[name].watermark
        assert watermark is not None  # asked of the tables with a rowtime only
        return watermark.delay_ms

    def _sentinel(self, table: TableDef, at: dt.datetime) -> tuple:
        values = [at if c.name == table.rowtime else None for c in table.physical_columns]
        return (*values, -1, *[None] * len(self.rowtime_tables), True)

    def file_schema(self, table: TableDef) -> StructType:
        """The table's physical columns (timestamps as TIMESTAMP_NTZ in the files) + arrival, watermarks, sentinel."""
        fields = [
            StructField(
                c.name,
                TimestampNTZType() if isinstance(c.declared_type.spark, TimestampType) else c.declared_type.spark,
                True,
            )
            for c in table.physical_columns
        ]
        fields.append(StructField(_ARRIVAL, LongType(), False))
        fields += [StructField(self.watermark_columns[w], LongType(), True) for w in self.rowtime_tables]
        fields.append(StructField(_SENTINEL, BooleanType(), False))
        return StructType(fields)

    def stream(self, spark: SparkSession, table: TableDef, directory: Path) -> DataFrame:
        """The table's changelog stream: physical columns, ``_rowkind``, ``_seq`` = arrival index, watermark columns."""
        schema = self.file_schema(table)
        write_changelog_batches(directory, schema, self.batches[table.name])
        df = read_changelog_files(spark, directory, schema)
        for c in table.physical_columns:
            if isinstance(c.declared_type.spark, TimestampType):
                df = df.withColumn(c.name, F.col(f"`{c.name}`").cast("timestamp"))
        if table.rowtime and table.name in self.watermarked:
            assert table.watermark is not None  # it has a rowtime
            df = with_source_watermark(df, table.rowtime, table.watermark.delay_ms)
            # Referencing the rowtime keeps Spark from pushing this filter below the watermark.
            df = df.where(~F.col(_SENTINEL) | F.col(f"`{table.rowtime}`").isNull())
        else:
            df = df.where(~F.col(_SENTINEL))
        return df.withColumn("_seq", F.col(_ARRIVAL)).drop(_ARRIVAL, _SENTINEL)


def _format(value, t: SqlType | None):
    if value is None:
        return None
    if t is not None and t.family == "timestamp" or isinstance(value, dt.datetime):
        text = value if isinstance(value, str) else value.strftime("%Y-%m-%d %H:%M:%S.%f")
        precision = 3 if t is None or t.precision is None else min(t.precision, 6)
        return text[: 20 + precision] if precision else text[:19]
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return value


def _sort_key(row):
    return [(v is not None, str(type(v)), v if v is not None else 0) for v in row]


@dataclass
class _Prepared:
    """A case planned and translated: its output stream (timestamps as text) and what its result needs."""

    case: Case
    output: DataFrame
    fields: list
    spark_types: dict


def _prepare(spark: SparkSession, case: Case, work_dir: Path, micro_batch_rows: int) -> _Prepared | dict:
    """Plan and translate ``case`` over its input files in ``work_dir``; ``{"error": …}`` if the planner refuses it."""
    if micro_batch_rows < 1:
        raise ValidationError(f"micro_batch_rows must be >= 1, got {micro_batch_rows}")
    try:
        script: Script = plan_script(case_script(case), f"<case {case.name}>")
        statement: PlannedStatement = script.statements[-1]
        feed = _Feed(case, script.catalog.tables, micro_batch_rows, watermarked_tables(statement.sink))
        used = statement.sink.source_tables()
        sources = {
            name: feed.stream(spark, table, work_dir / "input" / name)
            for name, table in script.catalog.tables.items()
            if name in used
        }
        translator = Translator(sources, script.source, watermark_columns=feed.watermark_columns)
        output = translator.translate(statement.sink)
    except StreamJoinError as e:
        return {"error": str(e)}
    spark_types = {f.name: f.dataType for f in output.schema.fields}
    # Timestamps leave Spark as text in the session time zone (UTC), not as local-time datetimes.
    output = output.select(
        *[
            F.date_format(F.col(f"`{c}`"), "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(c)
            if isinstance(t, TimestampType)
            else F.col(f"`{c}`")
            for c, t in spark_types.items()
        ]
    )
    return _Prepared(case, output, statement.sink.fields, spark_types)


def _result(prepared: _Prepared, changes: list[tuple[int, RowKind, tuple]]) -> dict:
    """The result document of a case from its collected ``(batch, RowKind, values)`` changes."""
    types = [f.type for f in prepared.fields]
    changelog = [(kind, tuple(_format(v, t) for v, t in zip(values, types))) for _, kind, values in changes]
    final_rows: list[list[Any]] | dict[str, str]
    try:
        final = materialize(changelog)
        final_rows = sorted((list(r) for r, n in final.items() for _ in range(n)), key=_sort_key)
    except ChangelogError as e:
        final_rows = {"error": f"the changelog does not materialise: {e}"}
    columns = [[f.name, (f.type or from_spark(prepared.spark_types[f.name])).display_name] for f in prepared.fields]
    return {
        "name": prepared.case.name,
        "columns": columns,
        "changelog": [[kind.short, *values] for kind, values in changelog],
        "final": final_rows,
    }


def replay_case(spark: SparkSession, case: Case, work_dir: Path, *, micro_batch_rows: int = 1) -> dict:
    """Plan and run one case; returns its result document (or ``{"error": …}`` when the planner refuses it).

    Args:
        spark: the session (Delta/RocksDB as :func:`streamjoin.session.spark_session`).
        case: the case.
        work_dir: an empty folder for the case's input files and checkpoint.
        micro_batch_rows: arrivals per micro-batch (>= 1).

    Raises:
        pyspark.errors.StreamingQueryException: when the query fails at run time.
    """
    prepared = _prepare(spark, case, work_dir, micro_batch_rows)
    if isinstance(prepared, dict):
        return prepared
    return _result(prepared, collect_changelog(prepared.output, work_dir / "checkpoint"))


def _replay_together(spark: SparkSession, prepared: list[_Prepared], checkpoint: Path) -> list[dict]:
    """Run the shareable cases ``prepared`` as one streaming query and split its changelog by case.

    Each case keeps its own sources, operators and state; the query unions their outputs (case ``i``'s columns
    renamed ``_c<i>_<j>``, the others' null) with a ``_case`` column. Micro-batch ``k`` of the query reads file
    ``k`` of every case's sources, so each case sees the micro-batches it would see alone.
    """
    parts, widths = [], []
    for i, p in enumerate(prepared):
        out = with_seq_path(p.output)
        values = [c for c in out.columns if c not in (ROWKIND_COLUMN, SEQ_COLUMN)]
        widths.append(len(values))
        parts.append(
            out.select(
                *[F.col(f"`{c}`").alias(f"_c{i}_{j}") for j, c in enumerate(values)],
                F.col(ROWKIND_COLUMN),
                F.col(SEQ_COLUMN),
                F.lit(i).alias(_CASE),
            )
        )
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.unionByName(part, allowMissingColumns=True)
    columns = [c for c in merged.columns if c not in (ROWKIND_COLUMN, SEQ_COLUMN)]
    at_case = columns.index(_CASE)
    positions = [[columns.index(f"_c{i}_{j}") for j in range(width)] for i, width in enumerate(widths)]
    changes: list[list[tuple[int, RowKind, tuple]]] = [[] for _ in prepared]
    for batch_id, kind, row in collect_changelog(merged, checkpoint):
        case = row[at_case]
        changes[case].append((batch_id, kind, tuple(row[k] for k in positions[case])))
    return [_result(p, c) for p, c in zip(prepared, changes)]


def _shareable(case: Case) -> bool:
    """Whether ``case`` may share a streaming query with other cases (:func:`_replay_together`): no watermark
    (Spark has one per query), no processing time, no SET in its setup; from its plan alone."""
    if any(t.get("proctime") for t in case.tables) or any(s.lstrip().upper().startswith("SET") for s in case.setup):
        return False
    try:
        script = plan_script(case_script(case), f"<case {case.name}>")
    except StreamJoinError:
        return False  # refused: replayed alone, which gives the refusal
    return not watermarked_tables(script.statements[-1].sink)


def replay_cases(
    spark: SparkSession,
    paths: Iterable[str | Path],
    out_dir: str | Path,
    *,
    micro_batch_rows: int = 1,
    parallelism: int | None = None,
    shared: int = SHARED_QUERY_CASES,
) -> dict[str, dict]:
    """Replay every case file in ``paths``, writing ``out_dir/NAME.json`` for each; a failing case stops no other.

    Cases without event time, processing time or SET statements run ``shared`` to a streaming query
    (:func:`_replay_together`: a micro-batch's fixed cost, its offset and commit logs and planning, paid once for
    them all), the others one to a query; ``parallelism`` queries at a time (a case's micro-batches are short and
    mostly wait on I/O; by default 4 on the jvm engine, 2 on python, whose workers are CPU-bound), with one
    shuffle partition (cases are tiny; Spark's setting is restored afterwards). When a shared query fails, its
    cases run again one to a query, so that a failure is the failing case's alone. A case whose query fails
    because Spark's Python worker did not start in time runs again (up to 3 attempts); any other failure is
    the case's ``{"error": …}``.

    Returns:
        case name → its result document.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cases = [load_case_file(p) for p in paths]
    if parallelism is None:
        parallelism = 4 if engine(spark) == "jvm" else 2

    def write(case: Case, result: dict) -> dict:
        (out / f"{case.name}.json").write_text(json.dumps(result, indent=1) + "\n")
        return result

    def run(case: Case) -> dict:
        for attempt in range(1, _ATTEMPTS + 1):
            work = out / "_work" / case.name
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            try:
                result = replay_case(spark, case, work, micro_batch_rows=micro_batch_rows)
                break
            except Exception as e:  # noqa: BLE001 - a failing query must not stop the other cases
                first_line = str(e).splitlines()[0] if str(e) else ""
                result = {"error": f"{type(e).__name__}: {first_line}"}
                # Spark waits 10 s (not configurable) for a Python worker to start; on an overloaded
                # machine that is not always enough: the case runs again.
                if attempt < _ATTEMPTS and "Python worker failed to connect back" in str(e):
                    continue
                break
        return write(case, result)

    def run_together(index: int, group: list[Case]) -> list[dict]:
        work = out / "_work" / f"_shared{index}"
        try:
            prepared = [_prepare(spark, case, work / case.name, micro_batch_rows) for case in group]
            ready = [p for p in prepared if isinstance(p, _Prepared)]
            results = iter(_replay_together(spark, ready, work / "checkpoint") if ready else [])
            return [write(c, p if isinstance(p, dict) else next(results)) for c, p in zip(group, prepared)]
        except Exception:  # noqa: BLE001 - each case alone says which failed and how
            return [run(case) for case in group]

    together = [c for c in cases if shared > 1 and _shareable(c)]
    groups = [together[i : i + shared] for i in range(0, len(together), shared)]
    alone = [c for c in cases if c not in together]
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    assert previous is not None  # the setting has a default
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        with ThreadPoolExecutor(max_workers=max(1, parallelism)) as pool:
            shared_runs = [pool.submit(run_together, i, g) for i, g in enumerate(groups)]
            alone_runs = [pool.submit(run, c) for c in alone]
            by_name: dict[str, dict] = {}
            for group, group_run in zip(groups, shared_runs):
                by_name.update(zip([c.name for c in group], group_run.result()))
            for case, case_run in zip(alone, alone_runs):
                by_name[case.name] = case_run.result()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    shutil.rmtree(out / "_work", ignore_errors=True)
    return {c.name: by_name[c.name] for c in cases}
