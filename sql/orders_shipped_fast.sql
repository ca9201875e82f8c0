-- orders_shipped_fast: each placed order with its line items shipped within 30 days of the order,
-- an event-time interval join (docs/semantics.md §3), LEFT: an order with no such shipment is emitted
-- once, with null line-item columns, when the watermark has passed its 30 days.
--
-- Both inputs are append-only event streams (an interval join consumes insert-only input); the
-- output is insert-only, so the sink takes it without a materializer. The sink key uses
-- l_linenumber 0 for "no line item shipped within 30 days" (a primary key column is NOT NULL).
-- The table is partitioned by the order's placement day (PARTITIONED BY, a day of the interval join's left
-- rowtime): `streamjoin backfill` recomputes a range of days, Dagster has a daily partition per day from
-- 'backfill.start-date' on (docs/backfill.md). The key holds the day too (a function of the order, so no
-- less unique): each micro-batch's MERGE then reads only the days of its own rows (docs/semantics.md §7.3).

CREATE TABLE orders_shipped_fast (
  o_orderkey   BIGINT,
  l_linenumber INT,
  o_ordertime  TIMESTAMP(3),
  l_shiptime   TIMESTAMP(3),
  l_quantity   DECIMAL(15, 2),
  l_shipmode   STRING,
  o_orderday   DATE,
  PRIMARY KEY (o_orderkey, l_linenumber, o_orderday) NOT ENFORCED
) PARTITIONED BY (o_orderday) WITH (
  'connector' = 'delta',
  'backfill.start-date' = '2002-01-01'
);

CREATE TEMPORARY VIEW placed_orders AS
SELECT o_orderkey, o_ordertime, event_time FROM order_events WHERE op = 'c';

INSERT INTO orders_shipped_fast
SELECT o.o_orderkey, COALESCE(s.l_linenumber, 0), o.o_ordertime, s.l_shiptime, s.l_quantity, s.l_shipmode,
  CAST(o.event_time AS DATE)
FROM placed_orders AS o
LEFT JOIN shipments AS s
  ON o.o_orderkey = s.l_orderkey
  AND s.l_shiptime BETWEEN o.event_time AND o.event_time + INTERVAL '30' DAY;
