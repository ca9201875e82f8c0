"""From a finished plan to a Spark changelog DataFrame: one call into ``streamjoin.runtime`` per node.

Like Flink's ``StreamExec*`` translation, this is the single place that picks
the operator for a plan node and hands it its arguments; operators execute and
never validate SQL. Every DataFrame between nodes is a changelog (the node's
field names + ``_rowkind`` + ``_seq``, docs/semantics.md §1).

| node | runtime call |
| --- | --- |
| TableSourceScan | the source's changelog DataFrame (+ computed columns, Spark SQL) |
| Calc | ``where`` + ``select`` of Spark SQL expressions |
| Join | ``regular_join.regular_join`` |
| IntervalJoin | ``interval_join.interval_join`` |
| WindowJoin | ``window_join.window_join`` |
| TemporalJoin | ``temporal_join.temporal_join`` |
| LookupJoin | ``temporal_join.lookup_join`` |
| OverAggregate | ``over_aggregate.over_aggregate`` |
| Deduplicate | ``deduplicate.deduplicate`` |
| Rank | ``rank.rank`` |
| GroupAggregate | ``group_aggregate.group_aggregate`` |
| WindowTableFunction | ``window_table_function.assign_windows`` |
| WindowAggregate | ``window_aggregate.window_aggregate`` |
| WindowRank | ``window_rank.window_rank`` |
| SinkUpsertMaterializer | ``upsert_materializer.sink_upsert_materialize`` |
| ChangelogNormalize | ``changelog_normalize.changelog_normalize`` |
| Union | ``unionByName`` |
| DropUpdateBefore (and nodes that omit ``-U``) | a filter on ``_rowkind`` |

**Per-row watermarks.** A source may carry, per rowtime table ``T``, a LONG
column with ``T``'s watermark when the row arrived (``watermark_columns``; the
case replay does, to feed operators exactly as Flink was fed). An event-time
operator then gets the combined watermark of the tables it reads (their
minimum, NULL while one of them has none) as its row-watermark column. Without
them operators use Spark's watermark, which moves once per micro-batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DataType

from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, with_seq_path
from streamjoin.connectors.watermark import with_source_watermark
from streamjoin.errors import UnsupportedPlanError, ValidationError
from streamjoin.planner.catalog import TableDef
from streamjoin.planner.changelog_modes import drops_update_before
from streamjoin.planner.diagnostics import SqlSource
from streamjoin.planner.expressions import Typer, spark_sql
from streamjoin.planner.plan import (
    Calc,
    ChangelogNormalize,
    Deduplicate,
    DropUpdateBefore,
    Field,
    GroupAggregate,
    IntervalJoin,
    LookupJoin,
    Node,
    OverAggregate,
    Rank,
    RegularJoin,
    Sink,
    SinkUpsertMaterializer,
    TableScan,
    TemporalJoin,
    Union,
    WindowAggregate,
    WindowJoin,
    WindowRank,
    WindowTableFunction,
)
from streamjoin.runtime.changelog_normalize import changelog_normalize
from streamjoin.runtime.deduplicate import deduplicate
from streamjoin.runtime.group_aggregate import group_aggregate
from streamjoin.runtime.interval_join import interval_join
from streamjoin.runtime.over_aggregate import over_aggregate
from streamjoin.runtime.over_aggregate.functions import Frame
from streamjoin.runtime.processor import ROOT_BYTES
from streamjoin.runtime.rank import rank
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.temporal_join import lookup_join, temporal_join
from streamjoin.runtime.upsert_materializer import sink_upsert_materialize
from streamjoin.runtime.window_aggregate import window_aggregate
from streamjoin.runtime.window_join import window_join
from streamjoin.runtime.window_rank import window_rank
from streamjoin.runtime.window_table_function import assign_windows

__all__ = ["ROW_WATERMARK_COLUMN", "Translator"]

#: The combined row watermark handed to an event-time operator (LONG epoch ms).
ROW_WATERMARK_COLUMN = "_row_watermark"
_CHANGELOG = (ROWKIND_COLUMN, SEQ_COLUMN)


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]


def _col(name: str):
    return F.col(f"`{name}`")


def _millis(name: str) -> Column:
    """The TIMESTAMP column ``name`` as epoch ms."""
    return F.unix_millis(_col(name))


def _window_row_time(window_start: str) -> Column:
    """What the window operators take for a windowed row's event time in telling the rows an upstream operator fired
    on the watermark (:meth:`Translator._with_row_watermark`): its window's start, at or before the row's time in
    each of the row's windows (the copies of one HOP row must not be told apart)."""
    return _millis(window_start)


def _spark_type(field: Field) -> DataType:
    assert field.type is not None, f"field '{field.name}' has no type"
    return field.type.spark


class Translator:
    """Builds the changelog DataFrame of a plan.

    Args:
        sources: table name → the table's changelog DataFrame (physical columns + ``_rowkind`` + ``_seq``,
            with a watermark on a physical rowtime).
        source: the SQL text (for the typer of expressions).
        delta_path: table → the location of a Delta table (lookup joins).
        watermark_columns: table name → the column its rows carry with the table's watermark at arrival
            (see the module docstring), or empty.

    Example:
        >>> changes = Translator({"orders": orders_df}, source).translate(statement.sink)  # doctest: +SKIP
    """

    def __init__(
        self,
        sources: Mapping[str, DataFrame],
        source: SqlSource,
        *,
        delta_path: Callable[[TableDef], str] | None = None,
        watermark_columns: Mapping[str, str] | None = None,
    ):
        self.sources = sources
        self.source = source
        self.delta_path = delta_path
        self.watermark_columns = dict(watermark_columns or {})

    # -------------------------------------------------------------- helpers

    def _hidden(self, df: DataFrame) -> list[str]:
        return [c for c in self.watermark_columns.values() if c in df.columns]

    def _data(self, df: DataFrame, node: Node, names: list[str] | None = None, *, hidden: bool = False) -> DataFrame:
        """``df`` reduced to ``node``'s fields (renamed to ``names``) + the changelog columns (+ hidden columns)."""
        names = names or node.field_names
        columns = [_col(f).alias(n) for f, n in zip(node.field_names, names)]
        return df.select(*columns, *_CHANGELOG, *(self._hidden(df) if hidden else []))

    def _with_row_watermark(
        self, df: DataFrame, node: Node, time: Column | None = None
    ) -> tuple[DataFrame, str | None]:
        """``df`` plus the row watermark column of the event-time operator ``node``, when its rows carry one.

        A source's row carries the combined watermark (epoch ms) of the tables ``node`` reads at its arrival, when
        the sources give it per row (the module docstring), less the watermark delay of ``node``'s input; a row that
        an upstream operator emitted (a ``_seq`` longer than a root) carries ``time``, its event time as ``node``
        compares it with the watermark (:attr:`~streamjoin.runtime.processor.Element.watermark`: it tells the rows
        fired by the watermark that made the current time). NULL where neither applies.
        """
        columns = [self.watermark_columns[t] for t in sorted(node.source_tables()) if t in self.watermark_columns]
        per_row = None
        if columns and all(c in df.columns for c in columns):
            combined = F.least(*[_col(c) for c in columns]) if len(columns) > 1 else _col(columns[0])
            any_null = F.lit(False)
            for c in columns:
                any_null = any_null | _col(c).isNull()
            delayed = combined - F.lit(node.input_watermark_delay_ms)
            per_row = F.when(any_null, F.lit(None).cast("long")).otherwise(delayed)
        chained = time is not None and isinstance(df.schema[SEQ_COLUMN].dataType, BinaryType)
        if per_row is None and not chained:
            return df, None
        value = per_row if per_row is not None else F.lit(None).cast("long")
        if chained:
            assert time is not None  # chained needs it
            value = F.when(F.length(F.col(SEQ_COLUMN)) > ROOT_BYTES, time).otherwise(value)
        return df.withColumn(ROW_WATERMARK_COLUMN, value), ROW_WATERMARK_COLUMN

    @staticmethod
    def _drop_update_before(df: DataFrame) -> DataFrame:
        return df.where(F.col(ROWKIND_COLUMN) != "-U")

    # -------------------------------------------------------------- nodes

    def translate(self, node: Node) -> DataFrame:
        """The changelog DataFrame of ``node``: its fields + ``_rowkind`` + ``_seq``, hidden columns kept if possible.

        Raises:
            UnsupportedPlanError: a scanned table without an input stream, a lookup join without a Delta location.
        """
        handler = getattr(self, f"_{type(node).__name__}")
        df = handler(node)
        if drops_update_before(node) and not isinstance(node, DropUpdateBefore):
            df = self._drop_update_before(df)
        return df

    def _TableScan(self, node: TableScan) -> DataFrame:
        if node.table.name not in self.sources:
            raise UnsupportedPlanError(f"no input stream for table '{node.table.name}' ({node.table.connector})")
        df = self.sources[node.table.name]
        typer = Typer({f.name: f.type for f in node.fields}, self.source)
        for f in node.fields:
            if f.name in node.computed:
                df = df.withColumn(f.name, F.expr(spark_sql(node.computed[f.name], typer)))
        table = node.table
        if table.rowtime in node.computed:
            assert table.watermark is not None  # it has a rowtime
            df = with_source_watermark(df, table.rowtime, table.watermark.delay_ms)
        return self._data(df, node, hidden=True)

    def _Calc(self, node: Calc) -> DataFrame:
        df = self.translate(node.inputs[0])
        typer = Typer({f.name: f.type for f in node.inputs[0].fields}, self.source)
        if node.condition is not None:
            df = df.where(F.expr(spark_sql(node.condition, typer)))
        columns = [F.expr(spark_sql(e, typer)).alias(f.name) for f, e in node.projections]
        return df.select(*columns, *_CHANGELOG, *self._hidden(df))

    def _Union(self, node: Union) -> DataFrame:
        frames = [self.translate(child) for child in node.inputs]
        hidden = [c for c in self._hidden(frames[0]) if all(c in f.columns for f in frames)]
        # A source's LONG _seq and an operator's BINARY one union as paths (changelog.with_seq_path).
        frames = [with_seq_path(f).select(*[_col(c) for c in node.field_names], *_CHANGELOG, *hidden) for f in frames]
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionByName(frame)
        return union

    def _DropUpdateBefore(self, node: DropUpdateBefore) -> DataFrame:
        return self._drop_update_before(self.translate(node.inputs[0]))

    def _join_inputs(self, node, *, watermark: bool = False, times: tuple[Column, Column] | None = None):
        """The join's inputs (right fields renamed), its equi pairs, and the row watermark column both inputs carry
        with ``watermark`` (``times``: each side's event time, in its input's names; see :meth:`_with_row_watermark`),
        or None."""
        left = self.translate(node.left)
        right = self.translate(node.right)
        row_wm = None
        if watermark:
            left, left_wm = self._with_row_watermark(left, node, times[0] if times else None)
            right, right_wm = self._with_row_watermark(right, node, times[1] if times else None)
            if left_wm or right_wm:
                row_wm = ROW_WATERMARK_COLUMN
                unknown = F.lit(None).cast("long")
                left = left if left_wm else left.withColumn(row_wm, unknown)
                right = right if right_wm else right.withColumn(row_wm, unknown)
        extra = [row_wm] if row_wm else []
        left = left.select(*[_col(f) for f in node.left.field_names], *_CHANGELOG, *extra)
        right = right.select(
            *[_col(f).alias(n) for f, n in zip(node.right.field_names, node.right_names)], *_CHANGELOG, *extra
        )
        on = node.equi_pairs
        return left, right, on, row_wm

    def _pair_typer(self, node) -> Typer:
        """The types of a join's left fields and right fields under their output names (its residual's scope)."""
        return Typer(
            {f.name: f.type for f in node.left.fields}
            | {n: f.type for n, f in zip(node.right_names, node.right.fields)},
            self.source,
        )

    def _RegularJoin(self, node: RegularJoin) -> DataFrame:
        left, right, on, _ = self._join_inputs(node)
        typer = self._pair_typer(node)
        # The planner's unique keys and state layouts: the operator derives none itself.
        return regular_join(
            left,
            right,
            on=on,
            how=node.kind,
            condition=spark_sql(node.residual, typer) if node.residual is not None else None,
            left_unique_key=node.left_unique_key,
            right_unique_key=node.right_output_unique_key,
            state_ttl_ms=node.state_ttl_ms,
            layouts=(node.left_layout, node.right_layout),
        )

    def _IntervalJoin(self, node: IntervalJoin) -> DataFrame:
        left, right, on, row_wm = self._join_inputs(
            node, watermark=node.rowtime, times=(_millis(node.left_time), _millis(node.right_time))
        )
        if not on:
            # No equi key: one group, as Flink runs such a join with parallelism 1.
            left, right = left.withColumn("$const_l", F.lit(0)), right.withColumn("$const_r", F.lit(0))
            on = [("$const_l", "$const_r")]
        assert node.kind in ("inner", "left", "right", "full")  # join_kind refuses SEMI and ANTI JOIN
        joined = interval_join(
            left,
            right,
            on=on,
            left_time=node.left_time if node.rowtime else None,
            right_time=node.right_name(node.right_time) if node.rowtime else None,
            lower_bound_ms=node.lower_ms,
            upper_bound_ms=node.upper_ms,
            how=node.kind,
            row_watermark_column=row_wm,
            condition=None
            if node.post_filter is None
            else spark_sql(node.post_filter, Typer({f.name: f.type for f in node.fields}, self.source)),
            watermark_delay_ms=node.input_watermark_delay_ms,
        )
        return joined.select(*[_col(f) for f in node.field_names], *_CHANGELOG)

    def _WindowJoin(self, node: WindowJoin) -> DataFrame:
        times = (_window_row_time(node.left_window[0]), _window_row_time(node.right_window[0]))
        left, right, on, row_wm = self._join_inputs(node, watermark=True, times=times)
        typer = self._pair_typer(node)
        joined = window_join(
            left,
            right,
            on=on,
            left_window_end=node.left_window[1],
            right_window_end=node.right_name(node.right_window[1]),
            how=node.kind,
            condition=None if node.residual is None else spark_sql(node.residual, typer),
            row_watermark_column=row_wm,
            watermark_delay_ms=node.input_watermark_delay_ms,
        )
        return joined.select(*[_col(f) for f in node.field_names], *_CHANGELOG)

    def _TemporalJoin(self, node: TemporalJoin) -> DataFrame:
        times = (_millis(node.left_time), _millis(node.right_time))
        left, right, on, row_wm = self._join_inputs(node, watermark=True, times=times)
        assert node.kind in ("inner", "left")  # plan_temporal refuses the others
        return temporal_join(
            left,
            right,
            on=on,
            probe_time=node.left_time,
            version_time=node.right_name(node.right_time),
            how=node.kind,
            append_only_versions=node.append_only_versions,
            row_watermark_column=row_wm,
            watermark_delay_ms=node.input_watermark_delay_ms,
        )

    def _LookupJoin(self, node: LookupJoin) -> DataFrame:
        if self.delta_path is None:
            raise UnsupportedPlanError(
                f"lookup join against '{node.right.table.name}' needs the Delta table's location"
            )
        probe = self.translate(node.left).select(*[_col(f) for f in node.left.field_names], *_CHANGELOG)
        name, path = node.right.table.name, self.delta_path(node.right.table)
        try:
            table = probe.sparkSession.read.format("delta").load(path)
        except AnalysisException as e:
            raise ValidationError(
                f"lookup join: no Delta table '{name}' at {path} ({_first_line(e)}); create it before the pipeline "
                f"starts (the demo's Dagster asset '{name}' does)"
            ) from None
        missing = [f for f in node.right.field_names if f not in table.columns]
        if missing:
            raise ValidationError(
                f"lookup join: the Delta table '{name}' at {path} has no column {', '.join(missing)}; "
                f"its columns: {', '.join(table.columns)}"
            )
        table = table.select(*[_col(f).alias(n) for f, n in zip(node.right.field_names, node.right_names)])
        on = node.equi_pairs
        assert node.kind in ("inner", "left")  # plan_temporal refuses the others
        return lookup_join(probe, table, on=on, how=node.kind)

    def _OverAggregate(self, node: OverAggregate) -> DataFrame:
        input = node.inputs[0]
        df = self.translate(input)
        row_wm = None
        if node.rowtime:
            df, row_wm = self._with_row_watermark(df, node, _millis(node.order_by))
        df = df.select(*[_col(f) for f in input.field_names], *_CHANGELOG, *([row_wm] if row_wm else []))
        bound = {"preceding": node.preceding} if node.frame == "rows" else {"preceding_ms": node.preceding}
        return over_aggregate(
            df,
            partition_by=node.partition_by,
            order_by=node.order_by if node.rowtime else None,
            # 'rows' or 'range'; an UNBOUNDED GROUPS frame's 'groups' is refused there (ValidationError).
            frame=cast(Frame, node.frame),
            aggregates=[(a.output, a.function, a.arg) for a in node.aggregates],
            watermark_column=row_wm,
            watermark_delay_ms=node.input_watermark_delay_ms,
            **bound,
        )

    def _Deduplicate(self, node: Deduplicate) -> DataFrame:
        input = node.inputs[0]
        df = self.translate(input)
        row_wm = None
        if node.time == "ROWTIME" and node.keep == "first":
            df, row_wm = self._with_row_watermark(df, node, _millis(node.order_by))
        df = df.select(*[_col(f) for f in input.field_names], *_CHANGELOG, *([row_wm] if row_wm else []))
        deduplicated = deduplicate(
            df,
            key=node.keys,
            order_by=None if node.time == "PROCTIME" else node.order_by,
            keep=node.keep,
            watermark_column=row_wm,
            state_ttl_ms=node.state_ttl_ms,
            proctime_columns=[f.name for f in input.fields if f.is_proctime],
            watermark_delay_ms=node.input_watermark_delay_ms,
        )
        return deduplicated.select(
            *[_col(f) for f in input.field_names], F.lit(1).cast("long").alias(node.rank_field), *_CHANGELOG
        )

    def _Rank(self, node: Rank) -> DataFrame:
        input = node.inputs[0]
        assert node.rank_end is not None  # check_ranks refuses an unbounded rank
        out = rank(
            self._data(self.translate(input), input),
            partition_by=node.partition_by,
            order_by=node.order_by,
            rank_start=node.rank_start,
            rank_end=node.rank_end,
            rank_column=node.rank_field if node.output_rank else None,
            strategy=node.function,
            row_key=list(node.row_key) if node.function == "update" and node.row_key else [],
            state_ttl_ms=node.state_ttl_ms,
        )
        if not node.output_rank:  # one rank in range (a constant), or a column no consumer reads (check_ranks)
            constant = node.rank_start if node.rank_start == node.rank_end else None
            out = out.withColumn(node.rank_field, F.lit(constant).cast("long"))
        return self._data(out, node)

    def _GroupAggregate(self, node: GroupAggregate) -> DataFrame:
        input = node.inputs[0]
        df = self._data(self.translate(input), input)
        return group_aggregate(
            df,
            group_by=node.group_by,
            aggregates=[(a.output, a.function, a.arg) for a in node.aggregates],
            insert_only_input=input.is_insert_only,
            state_ttl_ms=node.state_ttl_ms,
            mini_batch=node.mini_batch,
        )

    def _WindowTableFunction(self, node: WindowTableFunction) -> DataFrame:
        input = node.inputs[0]
        df = self.translate(input)
        window = node.window
        assigned = assign_windows(
            df.select(*[_col(f) for f in input.field_names], *_CHANGELOG, *self._hidden(df)),
            kind=window.kind,
            time_column=window.time_col,
            size_ms=window.size_ms,
            step_ms=window.step_ms,
            offset_ms=window.offset_ms,
        )
        return self._data(assigned, node, hidden=True)

    def _WindowAggregate(self, node: WindowAggregate) -> DataFrame:
        input = node.inputs[0]
        df, row_wm = self._with_row_watermark(self.translate(input), node, _window_row_time(node.window_start))
        df = df.select(*[_col(f) for f in input.field_names], *_CHANGELOG, *([row_wm] if row_wm else []))
        out = window_aggregate(
            df,
            group_by=node.group_by,
            window_start=node.window_start,
            window_end=node.window_end,
            aggregates=[(a.output, a.function, a.arg) for a in node.aggregates],
            insert_only_input=input.is_insert_only,
            watermark_column=row_wm,
            session_gap_ms=node.window.size_ms if node.window.kind == "SESSION" else None,
            watermark_delay_ms=node.input_watermark_delay_ms,
        )
        if node.window_time is not None:
            # window_time is window_end − 1 ms, as the window table function computed it.
            out = out.withColumn(node.window_time, F.timestamp_millis(F.unix_millis(_col(node.window_end)) - F.lit(1)))
        return self._data(out, node)

    def _WindowRank(self, node: WindowRank) -> DataFrame:
        input = node.inputs[0]
        df, row_wm = self._with_row_watermark(self.translate(input), node, _window_row_time(node.window_start))
        df = df.select(*[_col(f) for f in input.field_names], *_CHANGELOG, *([row_wm] if row_wm else []))
        assert node.rank_end is not None  # check_ranks refuses an unbounded rank
        out = window_rank(
            df,
            partition_by=node.partition_by,
            window_end=node.window_end,
            order_by=node.order_by,
            rank_start=node.rank_start,
            rank_end=node.rank_end,
            rank_column=node.rank_field,
            newest_first_on_ties=node.keep == "last",
            watermark_column=row_wm,
            watermark_delay_ms=node.input_watermark_delay_ms,
        )
        return self._data(out, node)

    def _SinkUpsertMaterializer(self, node: SinkUpsertMaterializer) -> DataFrame:
        input = node.inputs[0]
        df = self._data(self.translate(input), input)
        upsert_key = list(input.upsert_keys[0]) if input.upsert_keys else None
        return sink_upsert_materialize(
            df, sink_key=list(node.primary_key), upsert_key=upsert_key, state_ttl_ms=node.state_ttl_ms
        )

    def _ChangelogNormalize(self, node: ChangelogNormalize) -> DataFrame:
        input = node.inputs[0]
        normalized = changelog_normalize(
            self._data(self.translate(input), input),
            key=list(node.key),
            update_before=node.update_kind == "BEFORE_AND_AFTER",
            state_ttl_ms=node.state_ttl_ms,
        )
        # Columns no consumer reads were projected out before it (normalize_projection): they leave it NULL.
        kept = set(input.field_names)
        return normalized.select(
            *[_col(f.name) if f.name in kept else F.lit(None).cast(_spark_type(f)).alias(f.name) for f in node.fields],
            *_CHANGELOG,
        )

    def _Sink(self, node: Sink) -> DataFrame:
        input = node.inputs[0]
        return self._data(self.translate(input), input, [f.name for f in node.fields])
