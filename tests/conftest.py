"""Shared fixtures: one Spark session and one Kafka broker per pytest run (per xdist worker)."""

from __future__ import annotations

import os

import pytest

# The Spark drivers the tests start in subprocesses (`streamjoin run`, Dagster runs, kill trials), which inherit
# this environment, compile with C1 only: each lives for seconds to minutes on small inputs, and a JFR recording
# of a cold 35 s `streamjoin run` spent 40 s of compiler-thread CPU on 2 cores (30 s of it C2, 3,159 methods);
# without C2 the same run took 28 s. The workers' own sessions (the `spark` fixture) keep the JVM's default: they
# live for the whole suite, and with C1 too the in-process tests lost more than the subprocesses gained (a clean
# run of the suite 2,117 -> 2,409 s). Pipelines and `make bench` keep the default too (C2 makes the jvm operators
# 23-43 % faster once warm; bench/RESULTS.md, "A cold driver").
# C1 alone also shrinks the JVM's default code cache from 240 to 48 MiB, which a driver running three pipelines
# filled ("Out of space in CodeCache for method handle intrinsic" failed its tasks: the kill trial's first-run
# failures of 2026-11-27 and -28), so the cache keeps its usual size.
# Compared by value, not by presence: pytest-xdist's workers inherit the controller's environment, in which
# this module has already set it, and their sessions must still start without it.
_SUBPROCESS_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
_SETS_JIT = os.environ.get("SPARK_SUBMIT_OPTS", _SUBPROCESS_JIT) == _SUBPROCESS_JIT
if _SETS_JIT:
    os.environ["SPARK_SUBMIT_OPTS"] = _SUBPROCESS_JIT


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Scheduling of ``make test`` (``pytest -n 2 --dist loadgroup``): a test file runs on one worker, as with
    ``--dist loadfile`` (its tests share module-scoped runs), unless its tests name their own
    ``xdist_group``: the long replays and kill trials split themselves into groups that two workers can
    run side by side. The groups of :data:`FIRST` start first, so that no long group starts last."""
    for item in items:
        if not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(key=_start_rank)


def pytest_configure(config):
    """Refuse ``--dist loadgroup`` under pytest 9: pytest-xdist 3.8 groups tests by renaming their ``_nodeid``,
    which pytest 9 no longer reads, so every group splits over the workers and each worker repeats the
    module-scoped replays — the suite silently takes twice as long."""
    if config.getoption("dist", None) == "loadgroup" and int(pytest.__version__.split(".")[0]) >= 9:
        raise pytest.UsageError(
            f"pytest-xdist's --dist loadgroup does not hold groups together under pytest {pytest.__version__}: "
            "install the pytest of pyproject.toml's test extra (make setup)"
        )


#: The longest groups (minutes each on 2 cores), longest first, by name (a name ending in ``_``: every group it
#: starts): ``make test`` passes ``--no-loadscope-reorder``, so groups start in this order (xdist would start
#: those with most tests first).
FIRST = (
    "test_dagster_ui",
    "kill_",
    "test_dagster_automation",
    "test_e2e_lakehouse",
    "flink_diff_python_1",
    "replay_python_1",
    "test_dagster_streaming",
    "test_backfill_e2e",
    "replay_jvm_1",
    "flink_diff_jvm_1",
    "test_sql_pipelines_e2e",
    "test_e2e_orders",
    "test_local_cluster",
)


def _start_rank(item) -> int:
    groups = [str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args]
    return next(
        (
            i
            for i, name in enumerate(FIRST)
            if any(g == name or (name.endswith("_") and g.startswith(name)) for g in groups)
        ),
        len(FIRST),
    )


@pytest.fixture(scope="session")
def spark():
    from streamjoin.session import spark_session

    if _SETS_JIT:
        del os.environ["SPARK_SUBMIT_OPTS"]
    try:
        session = spark_session("streamjoin-tests")
    finally:
        if _SETS_JIT:
            os.environ["SPARK_SUBMIT_OPTS"] = _SUBPROCESS_JIT
    from streamjoin.runtime.assertions import ASSERTIONS_CONF

    session.conf.set(ASSERTIONS_CONF, "true")  # every operator's visits checked (docs/semantics.md §1.1)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory):
    """Bootstrap servers of a real Kafka broker: ``$KAFKA_BOOTSTRAP_SERVERS``, else an embedded one for the session.

    The embedded broker is not the local service: it dies with the test process, however that ends.
    """
    import os

    from streamjoin.connectors.embedded_kafka import BOOTSTRAP_ENV, EmbeddedKafka

    if os.environ.get(BOOTSTRAP_ENV):
        yield os.environ[BOOTSTRAP_ENV]
        return
    with EmbeddedKafka(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker.bootstrap_servers


#: Scale factor of the TPC-H input of the end-to-end tests (1,500 orders, 6,000 line items).
SCALE_FACTOR = 0.001
#: Their orders are placed over 60 days (``TpchChangelog(days=...)``), not seven years: ~25 a day, so a table
#: partitioned by day has 60 partitions (a Delta write costs a file per partition) and the rates are months.
DAYS = 60


@pytest.fixture(scope="session")
def tpch():
    """The generated TPC-H changelogs (``streamjoin.datagen.tpch``) at :data:`SCALE_FACTOR` over :data:`DAYS`."""
    from streamjoin.config import local_dir
    from streamjoin.datagen.tpch import TpchChangelog, generate_tpch

    return TpchChangelog(generate_tpch(local_dir("tpch"), SCALE_FACTOR), days=DAYS)


@pytest.fixture(scope="session")
def tpch_inputs(spark, tpch):
    """:data:`tpch` as batch DataFrames (``checks.batch_inputs.BatchInputs``), for the batch expectations of
    ``checks``."""
    from checks.batch_inputs import BatchInputs

    return BatchInputs(spark, tpch)


@pytest.fixture(scope="session")
def demo_topics(kafka_bootstrap, tpch):
    """The demo topics (orders, lineitem, order_events, shipments, rates) loaded once into the test broker; records per
    topic."""
    from streamjoin.datagen.topics import load_topics

    return load_topics(kafka_bootstrap, tpch)


@pytest.fixture(params=["jvm", "python"])
def engine(request, spark):
    """Run the test once per operator engine (``spark.streamjoin.engine``); yields the engine's name."""
    from streamjoin.jvm import ENGINE_CONF

    before = spark.conf.get(ENGINE_CONF)
    spark.conf.set(ENGINE_CONF, request.param)
    yield request.param
    spark.conf.set(ENGINE_CONF, before)


#: For an operator-level replay of cases that ``test_replay.py`` / ``test_flink_diff.py`` already run on
#: both engines through the planner: the ``engine`` fixture on the default (jvm) engine only, which keeps
#: the suite within its time.
jvm_only = pytest.mark.parametrize("engine", ["jvm"], indirect=True)
