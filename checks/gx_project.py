"""The project's file-backed Great Expectations context (``gx/``) and the Checkpoint each asset check runs.

One GX 1.x file context holds, per asset check (named like the check):

- an Expectation Suite (``gx/expectations/<check>.json``),
- a Validation Definition (``gx/validation_definitions/<check>``) binding the suite to the
  whole-dataframe batch definition of a dataframe asset ``<check>`` of the Spark data source
  ``spark`` (``great_expectations.yml``),
- a Checkpoint (``gx/checkpoints/<check>``) with ``UpdateDataDocsAction``: each run stores its
  validation result under ``gx/uncommitted/validations/`` and rebuilds the Data Docs site
  ``gx/uncommitted/data_docs/local_site/`` (index + one page per result, so history across runs).

The context root is ``$GX_HOME`` (Great Expectations' own variable for a context root), else the
project's ``gx/``. Definitions are created or updated at check time, idempotently: a check writes a
file only when the code's expectations differ from it, so the committed ``gx/``
(:func:`write_definitions`) is only read by the repository's pipelines, and a new
``sql/`` file gets its definitions on its first check. Every use of the context holds an exclusive ``flock`` on
``<root>/uncommitted/checks.lock``: the stores and Data Docs are plain files rewritten in place
(``great_expectations.yml`` whole), so two checks, in one process or in several runs at once, must
not write them together; a context is opened fresh under the lock so it sees the others' writes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import great_expectations as gx
from great_expectations.checkpoint import UpdateDataDocsAction
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context import FileDataContext
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.exceptions import DataContextError
from pyspark.sql import DataFrame

from streamjoin.config import PROJECT_ROOT

__all__ = [
    "DATA_SOURCE",
    "GX_HOME_ENV",
    "RESULT_FORMAT",
    "CheckSpec",
    "Validation",
    "context_root",
    "ensure_checkpoint",
    "open_context",
    "run_checkpoint",
    "write_definitions",
]

#: Great Expectations' environment variable naming a context root (the folder of ``great_expectations.yml``).
GX_HOME_ENV = "GX_HOME"

#: The Spark data source every check's dataframe asset belongs to.
DATA_SOURCE = "spark"

#: What each validation keeps (GX's ``result_format``): counts and percents of unexpected values and a
#: sample of 10 failing rows (``unexpected_rows``, read on Spark with ``LIMIT``, never the whole list).
RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": 10, "include_unexpected_rows": True}


@dataclass(frozen=True)
class CheckSpec:
    """The GX side of one asset check: its name, notes and expectations.

    The name is that of its suite, validation definition, asset and checkpoint.
    """

    name: str
    description: str
    expectations: Sequence[gx.expectations.Expectation]


@dataclass(frozen=True)
class Validation:
    """One Checkpoint run: the GX verdict, one result per expectation, and its Data Docs page.

    Attributes:
        success: every expectation passed.
        results: GX's ``ExpectationValidationResult`` per expectation, in suite order.
        docs_url: ``file://`` URL of the validation result's page in the local Data Docs site.
    """

    success: bool
    results: list
    docs_url: str

    @property
    def docs_path(self) -> Path:
        """The page as a local path."""
        return Path(unquote(urlparse(self.docs_url).path))


def context_root() -> Path:
    """``$GX_HOME`` when set, else ``<project>/gx``."""
    return Path(os.environ.get(GX_HOME_ENV) or PROJECT_ROOT / "gx")


@contextlib.contextmanager
def open_context(root: Path | None = None) -> Iterator[FileDataContext]:
    """The file context at ``root`` (default :func:`context_root`; scaffolded if missing), under the context's lock."""
    root = root or context_root()
    (root / "uncommitted").mkdir(parents=True, exist_ok=True)
    with open(root / "uncommitted" / "checks.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            context = gx.get_context(mode="file", context_root_dir=root)
            if context.variables.progress_bars is None:
                # Progress bars would interleave with the run's log; set once, in great_expectations.yml.
                context.variables.progress_bars = ProgressBarsConfig(globally=False)
                context.variables.save()
            yield context
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _expectation_configs(expectations) -> list[dict]:
    return [{"type": e.expectation_type, "kwargs": dict(e.configuration.kwargs)} for e in expectations]


def _stored(store, name: str):
    try:
        return store.get(name)
    except DataContextError:
        return None


def ensure_checkpoint(context: FileDataContext, spec: CheckSpec) -> gx.Checkpoint:
    """The Checkpoint of ``spec``, adding or updating its data asset, suite, validation definition and checkpoint
    only where the stored ones differ from ``spec`` (so an unchanged check writes nothing)."""
    try:
        source = context.data_sources.get(DATA_SOURCE)
    except KeyError:
        source = context.data_sources.add_spark(name=DATA_SOURCE)
    try:
        asset = source.get_asset(spec.name)
    except LookupError:
        asset = source.add_dataframe_asset(name=spec.name)
    try:
        batch = asset.get_batch_definition(spec.name)
    except KeyError:
        batch = asset.add_batch_definition_whole_dataframe(spec.name)

    meta = {"notes": spec.description}
    suite = _stored(context.suites, spec.name)
    if (
        suite is None
        or suite.meta.get("notes") != spec.description
        or _expectation_configs(suite.expectations) != _expectation_configs(spec.expectations)
    ):
        suite = context.suites.add_or_update(
            gx.ExpectationSuite(name=spec.name, expectations=list(spec.expectations), meta=meta)
        )
    definition = _stored(context.validation_definitions, spec.name)
    if definition is None or definition.suite.id != suite.id or definition.data.id != batch.id:
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=spec.name, data=batch, suite=suite)
        )
    checkpoint = _stored(context.checkpoints, spec.name)
    if (
        checkpoint is None
        or checkpoint.result_format != RESULT_FORMAT
        or [d.id for d in checkpoint.validation_definitions] != [definition.id]
        or [a.type for a in checkpoint.actions] != ["update_data_docs"]
    ):
        checkpoint = context.checkpoints.add_or_update(
            gx.Checkpoint(
                name=spec.name,
                validation_definitions=[definition],
                result_format=RESULT_FORMAT,
                actions=[UpdateDataDocsAction(name="update_data_docs")],
            )
        )
    return checkpoint


def run_checkpoint(spec: CheckSpec, df: DataFrame, run_name: str, root: Path | None = None) -> Validation:
    """Validate ``df`` through the Checkpoint of ``spec`` in the context at ``root``, updating Data Docs.

    Args:
        run_name: GX run name (the Dagster run id), shown in Data Docs next to the run time.

    Raises:
        great_expectations.exceptions.GreatExpectationsError: an expectation that cannot be evaluated
            on ``df`` (e.g. a column it names is missing).
    """
    with open_context(root) as context:
        checkpoint = ensure_checkpoint(context, spec)
        result = checkpoint.run(batch_parameters={"dataframe": df}, run_id=RunIdentifier(run_name=run_name))
        [(identifier, validation)] = result.run_results.items()
        [page] = context.get_docs_sites_urls(resource_identifier=identifier, site_names=["local_site"])
        return Validation(bool(validation.success), list(validation.results), page["site_url"])


def write_definitions(specs: Sequence[CheckSpec], root: Path | None = None) -> None:
    """Add or update the GX definitions of ``specs`` in the context at ``root``.

    That is what ``gx/`` commits for the code location.
    """
    with open_context(root) as context:
        for spec in specs:
            ensure_checkpoint(context, spec)
