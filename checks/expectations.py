"""Great Expectations on Spark DataFrames, and the factory that turns suites into Dagster asset checks.

A check is a list of GX expectations evaluated on a sink table read as a
Spark DataFrame; its Dagster result carries GX's verdict per expectation as
metadata (expectation type, success, observed value). GX runs in an
ephemeral context, so nothing is written outside the project.
"""


from collections.abc import Callable, Sequence

import great_expectations as gx
from great_expectations.data_context.types.base import ProgressBarsConfig
from dagster import AssetCheckExecutionContext, AssetCheckResult, AssetCheckSeverity, AssetsDefinition, asset_check
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

__all__ = ["validate", "expectation_check", "table_difference", "CheckNotApplicable"]


class CheckNotApplicable(Exception):
    """Raised by a check's ``build`` when what it compares with does not exist yet (e.g. an
    upstream table never materialised): the check reports a warning naming ``reason`` instead of
    failing the run, since launching one pipeline alone is a normal thing to do."""


def validate(df: DataFrame, name: str, expectations: Sequence[gx.expectations.Expectation]) -> tuple[bool, list[dict]]:
    """Validate ``df`` against ``expectations`` with Great Expectations.

    Returns:
        ``(all passed, one dict per expectation: {"expectation", "kwargs", "success", "observed_value"})``.
    """
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = (
        context.data_sources.add_spark(name=f"{name}_source")
        .add_dataframe_asset(name=name)
        .add_batch_definition_whole_dataframe(f"{name}_all")
        .get_batch(batch_parameters={"dataframe": df})
    )
    suite = context.suites.add(gx.ExpectationSuite(name=f"{name}_suite", expectations=list(expectations)))
    result = batch.validate(suite)
    details = []
    for r in result.results:
        config = r.expectation_config
        kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}
        details.append({
            "expectation": config.type,
            "kwargs": kwargs,
            "success": bool(r.success),
            "observed_value": (r.result or {}).get("observed_value"),
        })
    return bool(result.success), details


def table_difference(actual: DataFrame, expected: DataFrame) -> DataFrame:
    """Rows of ``actual`` not in ``expected`` and the reverse, as multisets (``EXCEPT ALL`` both ways).

    Returns:
        ``expected``'s columns + ``_where`` (STRING: ``"only in actual"`` / ``"only in expected"``);
        empty when the two tables are equal.
    """
    actual = actual.select(*expected.columns)
    return actual.exceptAll(expected).withColumn("_where", F.lit("only in actual")).unionByName(
        expected.exceptAll(actual).withColumn("_where", F.lit("only in expected"))
    )


def expectation_check(
    asset: AssetsDefinition | str,
    name: str,
    description: str,
    build: Callable[..., tuple[DataFrame, Sequence[gx.expectations.Expectation]]],
    *,
    required_resource_keys: set[str],
    blocking: bool = True,
    additional_deps: Sequence[str] = (),
):
    """Build a Dagster asset check that validates a table with Great Expectations.

    Args:
        asset: the checked asset (or its key as a string).
        name: check name.
        description: what the check guarantees, shown in the Dagster UI.
        build: ``build(context) -> (DataFrame to validate, expectations)``; it reads resources from
            ``context.resources``.
        required_resource_keys: the resources ``build`` uses.
        blocking: a failed check stops downstream assets.
        additional_deps: other assets the check reads (materialised before it when in the same run;
            ``build`` raises :class:`CheckNotApplicable` when one has no table yet).

    Returns:
        An ``AssetChecksDefinition`` whose result has ``passed`` and per-expectation metadata.
    """

    @asset_check(
        asset=asset, name=name, description=description, blocking=blocking,
        required_resource_keys=required_resource_keys, additional_deps=list(additional_deps),
    )
    def _check(context: AssetCheckExecutionContext) -> AssetCheckResult:
        try:
            df, expectations = build(context)
        except CheckNotApplicable as reason:
            return AssetCheckResult(passed=False, severity=AssetCheckSeverity.WARN, metadata={"not evaluated": str(reason)})
        passed, details = validate(df, name, expectations)
        metadata = {
            f"{d['expectation']}({', '.join(f'{k}={v}' for k, v in d['kwargs'].items())})": (
                f"{'passed' if d['success'] else 'FAILED'}; observed {d['observed_value']}"
            )
            for d in details
        }
        return AssetCheckResult(passed=passed, severity=AssetCheckSeverity.ERROR, metadata=metadata)

    return _check
