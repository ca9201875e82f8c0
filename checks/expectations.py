"""Dagster asset checks that validate a Spark DataFrame through the project's Great Expectations Checkpoints.

An :class:`ExpectationCheck` is a GX :class:`~checks.gx_project.CheckSpec` (suite name,
notes, expectations: fixed when the code location loads) plus how the check reads the
DataFrame it validates. Its Dagster check runs the spec's Checkpoint
(:func:`checks.gx_project.run_checkpoint`), so every run lands in the Data Docs site, and
reports as metadata the link to that validation's Data Docs page and, per expectation, the
unexpected count and percent and a sample of failing rows (or GX's observed value for
table-level expectations).
"""

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import great_expectations as gx
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from checks.gx_project import CheckSpec, run_checkpoint

__all__ = [
    "CheckNotApplicable",
    "ExpectationCheck",
    "expectation_check",
    "expectation_metadata",
    "run_days",
    "table_difference",
    "within_run_days",
]


class CheckNotApplicable(Exception):
    """Raised by a check's ``build`` when what it compares with does not exist yet (e.g. an
    upstream table never materialised): the check reports a warning naming ``reason`` instead of
    failing the run, since launching one pipeline alone is a normal thing to do."""


@dataclass(frozen=True)
class ExpectationCheck:
    """One asset check validated with Great Expectations.

    Attributes:
        asset: the checked asset's key (a string).
        spec: the GX suite/checkpoint of the check; ``spec.name`` is the Dagster check name.
        build: ``build(context) -> DataFrame`` to validate; reads resources from ``context.resources``.
        required_resource_keys: the resources ``build`` uses.
        blocking: a failed check (severity ERROR) stops the assets downstream of ``asset`` in the run.
        additional_deps: other assets the check reads (materialised before it when in the same run;
            ``build`` raises :class:`CheckNotApplicable` when one has no table yet).
    """

    asset: str
    spec: CheckSpec
    build: Callable[[AssetCheckExecutionContext], DataFrame]
    required_resource_keys: frozenset[str]
    blocking: bool = True
    additional_deps: tuple[str, ...] = field(default=())

    def definition(self) -> AssetChecksDefinition:
        """The Dagster asset check: ``passed`` is the Checkpoint's verdict.

        Its metadata comes from :func:`expectation_metadata`.
        """

        @asset_check(
            asset=self.asset,
            name=self.spec.name,
            description=self.spec.description,
            blocking=self.blocking,
            required_resource_keys=set(self.required_resource_keys),
            additional_deps=list(self.additional_deps),
        )
        def _check(context: AssetCheckExecutionContext) -> AssetCheckResult:
            try:
                df = self.build(context)
            except CheckNotApplicable as reason:
                return AssetCheckResult(
                    passed=False, severity=AssetCheckSeverity.WARN, metadata={"not evaluated": str(reason)}
                )
            # GX computes one Spark job per metric: read the table (and its windows) once.
            df = df.persist()
            try:
                validation = run_checkpoint(self.spec, df, run_name=context.run.run_id)
            finally:
                df.unpersist()
            return AssetCheckResult(
                passed=validation.success,
                severity=AssetCheckSeverity.ERROR,
                metadata={
                    "data_docs": MetadataValue.url(validation.docs_url),
                    **expectation_metadata(validation.results),
                },
            )

        return _check


def expectation_check(
    asset: str,
    name: str,
    description: str,
    expectations: Sequence[gx.expectations.Expectation],
    build: Callable[[AssetCheckExecutionContext], DataFrame],
    *,
    required_resource_keys: set[str],
    blocking: bool = True,
    additional_deps: Sequence[str] = (),
) -> ExpectationCheck:
    """An :class:`ExpectationCheck` of ``asset`` named ``name`` (also its GX suite and checkpoint name)."""
    return ExpectationCheck(
        asset,
        CheckSpec(name, description, tuple(expectations)),
        build,
        frozenset(required_resource_keys),
        blocking,
        tuple(additional_deps),
    )


def _label(result) -> str:
    config = result.expectation_config
    kwargs = ", ".join(f"{k}={v}" for k, v in config.kwargs.items() if k != "batch_id")
    return f"{config.type}({kwargs})"


def expectation_metadata(results) -> dict[str, MetadataValue]:
    """One JSON metadata entry per GX ``ExpectationValidationResult``, keyed ``type(kwargs)``.

    Returns:
        ``{label: {"success", "unexpected_count", "unexpected_percent", "sample": [row dicts]}}`` for
        expectations on values (the sample is GX's ``unexpected_rows``, at most
        :data:`~checks.gx_project.RESULT_FORMAT`'s ``partial_unexpected_count`` rows), and
        ``{label: {"success", "observed_value"}}`` for table-level ones (a row count).
    """
    metadata = {}
    for r in results:
        found = r.result or {}
        entry = {"success": bool(r.success)}
        if "unexpected_count" in found:
            entry["unexpected_count"] = found["unexpected_count"]
            entry["unexpected_percent"] = found.get("unexpected_percent")
            entry["sample"] = found.get("unexpected_rows") or found.get("partial_unexpected_list", [])
        else:
            entry["observed_value"] = found.get("observed_value")
        if (r.exception_info or {}).get("raised_exception"):
            entry["exception"] = r.exception_info.get("exception_message")
        # Rows hold decimals and timestamps: JSON them as text, as the Data Docs page shows them.
        metadata[_label(r)] = MetadataValue.json(json.loads(json.dumps(entry, default=str)))
    return metadata


def table_difference(actual: DataFrame, expected: DataFrame) -> DataFrame:
    """Rows of ``actual`` not in ``expected`` and the reverse, as multisets (``EXCEPT ALL`` both ways).

    Returns:
        ``expected``'s columns + ``_where`` (STRING: ``"only in actual"`` / ``"only in expected"``);
        empty when the two tables are equal.
    """
    actual = actual.select(*expected.columns)
    return (
        actual.exceptAll(expected)
        .withColumn("_where", F.lit("only in actual"))
        .unionByName(expected.exceptAll(actual).withColumn("_where", F.lit("only in expected")))
    )


def run_days(context: AssetCheckExecutionContext) -> tuple[dt.date, dt.date] | None:
    """The days ``(first, last)`` (UTC, inclusive) a partition run of a daily-partitioned asset replaced: a Dagster
    backfill's range or the daily schedule's one day; ``None`` for a run without a partition (catch-up, continuous)."""
    if not (context.has_partition_key or context.has_partition_key_range):
        return None
    keys = context.partition_key_range
    return dt.date.fromisoformat(keys.start), dt.date.fromisoformat(keys.end)


def within_run_days(context: AssetCheckExecutionContext, frame: DataFrame, day_column: str | None) -> DataFrame:
    """``frame`` restricted to the :func:`run_days` of a partition run (rows whose DATE ``day_column`` is one of
    them), else unchanged.

    A partition run replaces just its days (docs/backfill.md): a check comparing the table with its batch
    recomputation compares those days, which that run answers for; the other days may not be filled yet.
    """
    days = run_days(context)
    if days is None or day_column is None:
        return frame
    return frame.where(F.col(day_column).between(F.lit(days[0]), F.lit(days[1])))
