"""The checks every SQL pipeline gets from its plan, whatever its topics hold: no hand listing per pipeline.

From a compiled :class:`~streamjoin.planner.SqlPipeline` (its sink's name, path and
primary key):

- ``<sink>_primary_key``: on the sink table, each primary-key column is not null and the key is
  unique (Flink's ``PRIMARY KEY ... NOT ENFORCED`` is a promise the upsert writer keeps, docs/semantics.md §7);
- ``<sink>_changelog_well_formed``: on ``<sink>_changelog``, every change is valid for its key in
  changelog order (:func:`changelog_violations`, docs/semantics.md §1.9);
- ``<sink>_equals_batch_query``: the sink table equals the pipeline's SQL run as a Spark batch query
  over what the topics hold (:func:`streamjoin.batch.batch_query`: an independent code path from the
  streaming operators, docs/semantics.md §10).

The first two are blocking. The third is not: rows the streaming operators dropped as late are in the
batch query's result (a deliberate difference, §10), so on real topics with late rows it fails by design
and its sample names them. Each factory of :data:`GENERIC_CHECKS` maps a pipeline to one check; a new
generic check is one more factory there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import great_expectations as gx
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checks.expectations import ExpectationCheck, expectation_check, run_days, table_difference, within_run_days
from streamjoin.backfill import BACKFILL_BATCH_ID, check_backfillable
from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN
from streamjoin.planner import SqlPipeline
from streamjoin.sink.delta import BATCH_ID_COLUMN, PROCESSING_TIME_COLUMN

__all__ = [
    "GENERIC_CHECKS",
    "VIOLATION_COLUMN",
    "WHERE_COLUMN",
    "batch_query_check",
    "changelog_check",
    "changelog_violations",
    "generic_checks",
    "primary_key_check",
]

#: The column :func:`changelog_violations` adds: why the change is invalid, null when it is valid.
VIOLATION_COLUMN = "_violation"

#: The resources a generic check reads the lakehouse with.
RESOURCES = frozenset({"spark", "lakehouse"})


def changelog_violations(changelog: DataFrame, key: Sequence[str]) -> DataFrame:
    """``changelog`` with :data:`VIOLATION_COLUMN` (STRING): what is wrong with each change, null when nothing.

    Changes are taken per ``key`` in the order they were applied (``_processing_time``, ``_batch_id``,
    ``_seq``: batch ids start again at 0 with a new checkpoint, the processing time does not). A key
    is present after ``+I``/``+U`` and absent after ``-U``/``-D`` (upsert semantics, §1.4); a change
    is invalid (docs/semantics.md §1.9) when it is

    - ``-U`` not directly followed by the accumulate that replaces it ("-U without its +U"): a
      ``+U``, or a ``+I`` where an outer join retracts a joined row and pads it with nulls (§2.4),
    - ``-U``/``-D`` of a key that is not present ("<kind> of a key not present"),
    - ``+I`` of a key already present ("+I of a key already present"),
    - ``+U`` as the key's first change ("+U of a key never inserted").

    Only the streaming run's changes are checked: a backfill's (``_batch_id`` =
    :data:`~streamjoin.backfill.BACKFILL_BATCH_ID`, docs/backfill.md) restate whole days as ``+I`` rows
    beside them, a replacement of those days rather than a continuation of the stream.

    Args:
        changelog: a ``<sink>_changelog`` table (sink columns + ``_rowkind``, ``_seq``, ``_batch_id``,
            ``_processing_time``, …; ``streamjoin/sink/delta.py``).
        key: the sink's primary-key columns.
    """
    changelog = changelog.where(F.col(BATCH_ID_COLUMN) != BACKFILL_BATCH_ID)
    order = Window.partitionBy(*key).orderBy(PROCESSING_TIME_COLUMN, BATCH_ID_COLUMN, SEQ_COLUMN)
    kind = F.col(ROWKIND_COLUMN)
    previous, following = F.lag(kind).over(order), F.lead(kind).over(order)
    present: Column = F.coalesce(previous.isin("+I", "+U"), F.lit(False))
    violation = (
        F.when((kind == "-U") & ~F.coalesce(following.isin("+U", "+I"), F.lit(False)), F.lit("-U without its +U"))
        .when(kind.isin("-U", "-D") & ~present, F.concat(kind, F.lit(" of a key not present")))
        .when((kind == "+I") & present, F.lit("+I of a key already present"))
        .when((kind == "+U") & previous.isNull(), F.lit("+U of a key never inserted"))
    )
    return changelog.withColumn(VIOLATION_COLUMN, violation)


def _read(context, path: str) -> DataFrame:
    return context.resources.spark.session().read.format("delta").load(path)


def _sink(context, pipeline: SqlPipeline):
    return pipeline.sink(context.resources.lakehouse.lakehouse())


def primary_key_check(pipeline: SqlPipeline) -> ExpectationCheck:
    """``<sink>_primary_key`` on the sink table: every key column not null, the key unique."""
    key = list(pipeline.primary_key)
    unique = (
        gx.expectations.ExpectColumnValuesToBeUnique(column=key[0])
        if len(key) == 1
        else gx.expectations.ExpectCompoundColumnsToBeUnique(column_list=key)
    )
    return expectation_check(
        pipeline.name,
        name=f"{pipeline.name}_primary_key",
        description=f"The primary key ({', '.join(key)}) of {pipeline.name} is not null and unique.",
        expectations=[*(gx.expectations.ExpectColumnValuesToNotBeNull(column=c) for c in key), unique],
        build=lambda context: _read(context, _sink(context, pipeline).path),
        required_resource_keys=RESOURCES,
    )


def changelog_check(pipeline: SqlPipeline) -> ExpectationCheck:
    """``<sink>_changelog_well_formed`` on ``<sink>_changelog``.

    No change is a :func:`changelog_violations` violation.
    """
    key = list(pipeline.primary_key)
    return expectation_check(
        f"{pipeline.name}_changelog",
        name=f"{pipeline.name}_changelog_well_formed",
        description=f"Per key ({', '.join(key)}), in the order applied, the changelog of {pipeline.name} "
        "is well formed: each -U directly followed by the +U (or an outer join's +I) that replaces it, "
        "no -U/-D of a key not present, no +I of a key already present, no +U of a key never inserted "
        "(docs/semantics.md §1.9, §2.4).",
        expectations=[gx.expectations.ExpectColumnValuesToBeNull(column=VIOLATION_COLUMN)],
        build=lambda context: changelog_violations(_read(context, _sink(context, pipeline).changelog_path), key),
        required_resource_keys=RESOURCES,
    )


#: The column of :func:`batch_query_check`'s difference rows: ``"only in actual"`` / ``"only in expected"``.
WHERE_COLUMN = "_where"


def batch_query_check(pipeline: SqlPipeline) -> ExpectationCheck:
    """``<sink>_equals_batch_query`` on the sink table: no row differs from :func:`streamjoin.batch.batch_query`.

    Validated on :func:`~checks.expectations.table_difference` (rows only in the table or only in the batch
    query, as multisets) with "``_where`` is null", so a failure carries the differing rows as its sample. In a
    partition run of a daily-partitioned pipeline, both sides are restricted to the run's days
    (:func:`~checks.expectations.within_run_days` on the sink's day column).
    """
    from streamjoin.batch import batch_query

    def build(context) -> DataFrame:
        home = context.resources.lakehouse.lakehouse()
        spark = context.resources.spark.session()
        # Only a backfillable pipeline has partition runs: its plan names the day column.
        day = check_backfillable(pipeline).day_column if run_days(context) else None
        expected = batch_query(pipeline, spark, context.resources.kafka.connection(), home)
        return table_difference(
            *(within_run_days(context, frame, day) for frame in (_read(context, pipeline.sink(home).path), expected))
        )

    return expectation_check(
        pipeline.name,
        name=f"{pipeline.name}_equals_batch_query",
        description=f"{pipeline.name} equals its SQL run as a Spark batch query over what the topics hold "
        "(late rows the streaming operators dropped are the expected difference, docs/semantics.md §10).",
        expectations=[gx.expectations.ExpectColumnValuesToBeNull(column=WHERE_COLUMN)],
        build=build,
        required_resource_keys=RESOURCES | {"kafka"},
        blocking=False,
    )


#: Factories of the checks every SQL pipeline gets.
GENERIC_CHECKS: tuple[Callable[[SqlPipeline], ExpectationCheck], ...] = (
    primary_key_check,
    changelog_check,
    batch_query_check,
)


def generic_checks(pipelines: Sequence[SqlPipeline]) -> list[ExpectationCheck]:
    """Every :data:`GENERIC_CHECKS` check of every pipeline."""
    return [make(p) for p in pipelines for make in GENERIC_CHECKS]
