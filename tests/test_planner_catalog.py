"""CREATE TABLE → the catalog: Flink types as Spark types, Kafka sources, Delta sinks, test tables."""

from pyspark.sql import types as T

from streamjoin.changelog import RowKind
from streamjoin.pipeline import Lakehouse
from streamjoin.planner import plan_script, sql_pipelines


def test_flink_types_become_spark_types():
    script = plan_script("""CREATE TABLE t (
      a TINYINT, b SMALLINT, c INT, d BIGINT, e FLOAT, f DOUBLE, g DECIMAL(15, 2), h DECIMAL, i BOOLEAN,
      j CHAR(3), k VARCHAR(20), l STRING, m BYTES, n DATE, o TIMESTAMP(3), p TIMESTAMP_LTZ(3), q TIMESTAMP
    ) WITH ('connector' = 'values');""")
    table = script.catalog.tables["t"]
    assert [f.dataType for f in table.physical_schema.fields] == [
        T.ByteType(), T.ShortType(), T.IntegerType(), T.LongType(), T.FloatType(), T.DoubleType(),
        T.DecimalType(15, 2), T.DecimalType(10, 0), T.BooleanType(), T.StringType(), T.StringType(), T.StringType(),
        T.BinaryType(), T.DateType(), T.TimestampType(), T.TimestampType(), T.TimestampType(),
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
    """)
    table = script.catalog.tables["events"]
    assert table.source_kinds == frozenset(RowKind)  # a RowKind field makes json a changelog
    source = table.kafka_source()
    assert (source.name, source.topic, source.format, source.rowkind_field, source.primary_key) == ("events", "ev", "json", "op", ("id",))
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
