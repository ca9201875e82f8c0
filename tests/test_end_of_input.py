"""End of input (``streamjoin run --available-now --end-of-input``) on the real path: Kafka → Spark → Delta.

A LEFT interval join pads an order without a shipment within a minute when the watermark passes the
order's window. A bounded run leaves the orders of the input's last minute undecided in state; ending the
input (Flink's +∞ watermark at the end of a bounded source) decides them: the table then holds what Flink
returns over the same finished input.
"""

import datetime as dt
import json

from streamjoin.cli import main
from streamjoin.connectors.kafka_admin import ensure_topics, produce

T0 = dt.datetime(2024, 1, 1)
SQL = """
CREATE TABLE eoi_orders (
  id BIGINT, ts TIMESTAMP(3), status STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'eoi_orders', 'format' = 'json', 'scan.startup.mode' = 'earliest-offset');
CREATE TABLE eoi_shipments (
  order_id BIGINT, sts TIMESTAMP(3),
  WATERMARK FOR sts AS sts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'eoi_shipments', 'format' = 'json', 'scan.startup.mode' = 'earliest-offset');
CREATE TABLE eoi_shipped (
  id BIGINT, ts TIMESTAMP(3), sts TIMESTAMP(3),
  PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'delta');
INSERT INTO eoi_shipped
SELECT o.id, o.ts, s.sts
FROM eoi_orders AS o
LEFT JOIN eoi_shipments AS s ON o.id = s.order_id AND s.sts BETWEEN o.ts AND o.ts + INTERVAL '1' MINUTE
WHERE o.status = 'placed';
"""


def _at(minutes: float) -> str:
    return (T0 + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S.%f")[:23]


def test_end_of_input_needs_a_bounded_run(tmp_path, capsys):
    (tmp_path / "p.sql").write_text(SQL)
    assert main(["run", str(tmp_path / "p.sql"), "--end-of-input"]) == 3
    assert "--end-of-input ends a bounded run: use it with --available-now" in capsys.readouterr().err


def test_end_of_input_flushes_the_buffered_rows_and_ends_the_input(spark, kafka_bootstrap, tmp_path, capsys):
    ensure_topics(kafka_bootstrap, {"eoi_orders": 1, "eoi_shipments": 1})
    orders = [
        (1, 0, "placed"),
        (2, 1, "placed"),
        (3, 2, "placed"),
        (4, 3, "placed"),
        (5, 4, "placed"),
        # The query's filter drops this one; it must not drop the end-of-input row before the watermark
        # (whose status is null): Spark would push `status = 'placed'` below it (connectors/watermark.py).
        (6, 4.5, "cancelled"),
    ]
    shipments = [(1, 0.5), (3, 2.2), (2, 3.0)]  # order 2's shipment is outside its minute: order 2 is unmatched
    produce(
        kafka_bootstrap, "eoi_orders", [(None, json.dumps({"id": i, "ts": _at(m), "status": s})) for i, m, s in orders]
    )
    produce(
        kafka_bootstrap, "eoi_shipments", [(None, json.dumps({"order_id": i, "sts": _at(m)})) for i, m in shipments]
    )
    (tmp_path / "p.sql").write_text(SQL)
    lake = tmp_path / "lake"
    run = [
        "run",
        str(tmp_path / "p.sql"),
        "--available-now",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--lakehouse",
        str(lake),
    ]

    def table():
        return {(r.id, r.sts) for r in spark.read.format("delta").load(str(lake / "eoi_shipped")).collect()}

    matched = {(1, T0 + dt.timedelta(minutes=0.5)), (3, T0 + dt.timedelta(minutes=2.2))}
    assert main(run) == 0
    # Watermark min(4.5, 3.0) min - 1 s: order 2's window (to minute 2) has passed, orders 4 and 5 wait.
    assert table() == matched | {(2, None)}

    assert main([*run, "--end-of-input"]) == 0
    ended = matched | {(2, None), (4, None), (5, None)}
    assert table() == ended

    capsys.readouterr()
    assert main(run) == 3
    assert "the input of table 'eoi_orders' has ended" in capsys.readouterr().err
    # Repeating the ended run resumes it and changes nothing.
    assert main([*run, "--end-of-input"]) == 0
    assert table() == ended
