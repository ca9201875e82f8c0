"""CREATE TABLE → the catalog: Flink types as Spark types, Kafka sources, Delta sinks, test tables."""

import pytest
from pyspark.sql import types as T

from streamjoin.changelog import RowKind
from streamjoin.config import PROJECT_ROOT
from streamjoin.datagen.topics import ORDERS, TOPICS
from streamjoin.errors import ValidationError
from streamjoin.pipeline import Lakehouse
from streamjoin.planner import load_script, plan_script, sql_pipelines


def test_flink_types_become_spark_types():
    script = plan_script("""CREATE TABLE t (
      a TINYINT, b SMALLINT, c INT, d BIGINT, e FLOAT, f DOUBLE, g DECIMAL(15, 2), h DECIMAL, i BOOLEAN,
      j CHAR(3), k VARCHAR(20), l STRING, m BYTES, n DATE, o TIMESTAMP(3), p TIMESTAMP_LTZ(3), q TIMESTAMP
    ) WITH ('connector' = 'values');""")
    table = script.catalog.tables["t"]
    assert [f.dataType for f in table.physical_schema.fields] == [
        T.ByteType(),
        T.ShortType(),
        T.IntegerType(),
        T.LongType(),
        T.FloatType(),
        T.DoubleType(),
        T.DecimalType(15, 2),
        T.DecimalType(10, 0),
        T.BooleanType(),
        T.StringType(),
        T.StringType(),
        T.StringType(),
        T.BinaryType(),
        T.DateType(),
        T.TimestampType(),
        T.TimestampType(),
        T.TimestampType(),
    ]
    assert [str(c.type) for c in table.columns][6:9] == ["DECIMAL(15, 2)", "DECIMAL(10, 0)", "BOOLEAN"]
    assert str(table.column("q").type) == "TIMESTAMP(6)" and str(table.column("l").type) == "STRING"


def test_kafka_table_is_a_kafka_source():
    script = plan_script("""
    CREATE TABLE events (
      id BIGINT, payload STRING, event_ms BIGINT,
      ts AS TO_TIMESTAMP_LTZ(event_ms, 3),
      WATERMARK FOR ts AS ts - INTERVAL '5' SECOND,
      PRIMARY KEY (id) NOT ENFORCED
    ) WITH ('connector' = 'kafka', 'topic' = 'ev', 'format' = 'json', 'json.rowkind-field' = 'op',
            'scan.startup.mode' = 'latest-offset', 'properties.bootstrap.servers' = 'b:9092',
            'properties.max.poll.records' = '100');
    CREATE TABLE out (id BIGINT, payload STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'delta', 'path' = '/lake/out');
    INSERT INTO out SELECT id, payload FROM events;
    """)  # noqa: E501
    table = script.catalog.tables["events"]
    assert table.source_kinds == frozenset(RowKind)  # a RowKind field makes json a changelog
    source = table.kafka_source()
    assert (source.name, source.topic, source.format, source.rowkind_field, source.primary_key) == (
        "events",
        "ev",
        "json",
        "op",
        ("id",),
    )
    assert source.schema.names == ["id", "payload", "event_ms"]  # the computed rowtime is the planner's
    assert source.rowtime is None and table.watermark.delay_ms == 5000
    assert source.options == {"kafka.max.poll.records": "100", "startingOffsets": "latest"}
    [pipeline] = sql_pipelines(script)
    sink = pipeline.sink(Lakehouse("/elsewhere"))
    assert (sink.name, sink.path, sink.primary_key) == ("out", "/lake/out", ("id",))
    assert pipeline.sink(Lakehouse("/elsewhere")).changelog_path == "/lake/out_changelog"


def test_plain_json_is_insert_only_and_values_tables_follow_their_changelog_mode():
    script = plan_script("""
    CREATE TABLE j (id INT) WITH ('connector' = 'kafka', 'topic' = 'j', 'format' = 'json');
    CREATE TABLE v (id INT) WITH ('connector' = 'values', 'changelog-mode' = 'I,UA,D');
    """)
    assert script.catalog.tables["j"].source_kinds == {RowKind.INSERT}
    assert script.catalog.tables["v"].source_kinds == {RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.DELETE}
    assert script.catalog.tables["j"].kafka_source().rowkind_field is None


BASE = """CREATE TABLE src (
  id BIGINT, v STRING, ts TIMESTAMP(3), pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND,
  PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'kafka', 'topic' = 'a', 'format' = 'json', 'properties.bootstrap.servers' = 'b:9092');
"""


def like(ddl: str):
    """The table ``t`` declared by ``ddl`` after :data:`BASE`."""
    return plan_script(BASE + ddl, "like.sql").catalog.tables["t"]


def columns(table) -> list[tuple[str, str]]:
    return [(c.name, str(c.type)) for c in table.columns]


def test_like_copies_columns_watermark_key_and_overwrites_options_by_default():
    t = like("CREATE TABLE t (x INT) WITH ('topic' = 'b') LIKE src;")
    # The LIKE table's columns first, then the new ones; the key's column stays NOT NULL, the rowtime a rowtime.
    assert columns(t) == [
        ("id", "BIGINT NOT NULL"),
        ("v", "STRING"),
        ("ts", "TIMESTAMP(3) *ROWTIME*"),
        ("pt", "TIMESTAMP_LTZ(3) *PROCTIME* NOT NULL"),
        ("x", "INT"),
    ]
    assert t.primary_key == ("id",) and (t.watermark.column, t.watermark.delay_ms) == ("ts", 1000)
    assert t.options == {"connector": "kafka", "topic": "b", "format": "json", "properties.bootstrap.servers": "b:9092"}
    assert like("CREATE TABLE t WITH ('topic' = 'b') LIKE src;").physical_schema.names == [
        "id",
        "v",
        "ts",
    ]  # no column list


def test_like_options_exclude_what_they_name():
    t = like("CREATE TABLE t (n BIGINT) WITH ('connector' = 'delta') LIKE src (EXCLUDING ALL INCLUDING CONSTRAINTS);")
    assert columns(t) == [("id", "BIGINT NOT NULL"), ("v", "STRING"), ("ts", "TIMESTAMP(3)"), ("n", "BIGINT")]
    assert t.primary_key == ("id",) and t.watermark is None and t.options == {"connector": "delta"}
    t = like(
        "CREATE TABLE t (WATERMARK FOR ts AS ts) WITH ('topic' = 'b') LIKE src (EXCLUDING CONSTRAINTS EXCLUDING WATERMARKS);"  # noqa: E501
    )
    assert t.primary_key == () and t.watermark.delay_ms == 0 and columns(t)[0] == ("id", "BIGINT")


def test_like_overwriting_lets_the_new_table_win():
    t = like(
        "CREATE TABLE t (pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('topic' = 'b') "
        "LIKE src (OVERWRITING WATERMARKS OVERWRITING GENERATED);"
    )
    assert t.watermark.delay_ms == 5000 and [c.name for c in t.columns] == ["id", "v", "ts", "pt"]


@pytest.mark.parametrize(
    "ddl, message",
    [
        (
            "CREATE TABLE t WITH ('topic' = 'b') LIKE nope;",
            "like.sql:6:42: table 't' is LIKE 'nope', which is not a declared table; tables: src [rule: like-table]",
        ),
        (
            "CREATE TABLE t (v INT) WITH ('topic' = 'b') LIKE src;",
            "like.sql:6:17: column 'v' of table 't' is already declared by its LIKE table 'src' [rule: unique-columns]",
        ),
        (
            "CREATE TABLE t (pt AS PROCTIME()) WITH ('topic' = 'b') LIKE src;",
            (
                "like.sql:6:17: column 'pt' of table 't' is already declared by its LIKE table 'src'; "
                "specify EXCLUDING GENERATED or OVERWRITING GENERATED [rule: unique-columns]"
            ),
        ),
        (
            "CREATE TABLE t (WATERMARK FOR ts AS ts) WITH ('topic' = 'b') LIKE src;",
            (
                "like.sql:6:31: table 't' declares a WATERMARK and its LIKE table 'src' has one (on 'ts'); "
                "specify EXCLUDING WATERMARKS or OVERWRITING WATERMARKS [rule: one-watermark]"
            ),
        ),
        (
            "CREATE TABLE t (PRIMARY KEY (v) NOT ENFORCED) WITH ('topic' = 'b') LIKE src;",
            (
                "like.sql:6:30: table 't' declares a PRIMARY KEY and its LIKE table 'src' has one; specify EXCLUDING CONSTRAINTS "  # noqa: E501
                "[rule: primary-key-columns]"
            ),
        ),
        (
            "CREATE TABLE t WITH ('topic' = 'b') LIKE src (INCLUDING OPTIONS);",
            (
                "like.sql:6:22: table 't': option 'topic' is also set by its LIKE table 'src' ('a'); "
                "specify EXCLUDING OPTIONS or OVERWRITING OPTIONS [rule: table-options]"
            ),
        ),
        (
            "CREATE TABLE t WITH ('topic' = 'b') LIKE src (OVERWRITING CONSTRAINTS);",
            "like.sql:6:42: LIKE option OVERWRITING CONSTRAINTS is not allowed: use INCLUDING or EXCLUDING [rule: like-options]",  # noqa: E501
        ),
        (
            "CREATE TABLE t WITH ('topic' = 'b') LIKE src (EXCLUDING OPTIONS INCLUDING OPTIONS);",
            "like.sql:6:42: LIKE option feature OPTIONS is given more than once [rule: like-options]",
        ),
        (
            "CREATE TABLE t WITH ('topic' = 'b') LIKE src (EXCLUDING COLUMNS);",
            (
                "like.sql:6:42: LIKE option EXCLUDING COLUMNS: the feature is one of ALL, CONSTRAINTS, DISTRIBUTION, GENERATED, "  # noqa: E501
                "METADATA, OPTIONS, PARTITIONS, WATERMARKS [rule: like-options]"
            ),
        ),
        (
            "CREATE TABLE t WITH ('topic' = 'b') LIKE src (EXCLUDING OPTIONS);",
            "like.sql:6:14: table 't': 'connector' must be one of kafka, upsert-kafka, delta, values; got None [rule: table-connector]",  # noqa: E501
        ),
    ],
    ids=[
        "unknown-table",
        "column",
        "computed-column",
        "watermark",
        "primary-key",
        "option",
        "overwriting-constraints",
        "repeated",
        "unknown-feature",
        "options-excluded",
    ],
)
def test_like_refuses_what_flink_refuses(ddl, message):
    with pytest.raises(ValidationError) as info:
        like(ddl)
    assert str(info.value) == message


def test_like_is_declared_in_order_a_view_is_not_a_table():
    with pytest.raises(ValidationError, match=r"table 't' is LIKE 'later', which is not a declared table"):
        plan_script(
            "CREATE TABLE t WITH ('connector' = 'values') LIKE later;\nCREATE TABLE later (a INT) WITH ('connector' = 'values');"  # noqa: E501
        )
    with pytest.raises(ValidationError, match=r"table 't' is LIKE 'w', which is not a declared table; tables: src"):
        plan_script(BASE + "CREATE VIEW w AS SELECT id FROM src;\nCREATE TABLE t WITH ('connector' = 'values') LIKE w;")


def test_the_demo_topics_are_the_sql_catalog_tables():
    script = load_script(PROJECT_ROOT / "sql" / "orders_current.sql")
    assert [script.catalog.tables[t.name].kafka_source() for t in TOPICS] == list(TOPICS)
    order_events = script.catalog.tables["order_events"]
    assert order_events.physical_schema.names == [*ORDERS.schema.names, "op", "event_time"]
    assert (order_events.rowtime, order_events.proctime, order_events.primary_key) == ("event_time", "proc_time", ())
