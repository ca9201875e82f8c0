-- orders_shipped_fast: each placed order with its line items shipped within 30 days of the order,
-- an event-time interval join (SEMANTICS.md §3), LEFT: an order with no such shipment is emitted
-- once, with null line-item columns, when the watermark has passed its 30 days.
--
-- Both inputs are append-only event streams (an interval join consumes insert-only input); the
-- output is insert-only, so the sink takes it without a materializer. The sink key uses
-- l_linenumber 0 for "no line item shipped within 30 days" (a primary key column is NOT NULL).

CREATE TABLE order_events (
  o_orderkey      BIGINT,
  o_custkey       BIGINT,
  o_orderstatus   STRING,
  o_totalprice    DECIMAL(15, 2),
  o_orderdate     DATE,
  o_ordertime     TIMESTAMP(3),
  o_orderpriority STRING,
  o_clerk         STRING,
  o_shippriority  INT,
  o_comment       STRING,
  op              STRING,
  event_time      TIMESTAMP(3),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' DAY
) WITH (
  'connector' = 'kafka',
  'topic' = 'order_events',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE shipments (
  l_orderkey      BIGINT,
  l_partkey       BIGINT,
  l_suppkey       BIGINT,
  l_linenumber    INT,
  l_quantity      DECIMAL(15, 2),
  l_extendedprice DECIMAL(15, 2),
  l_discount      DECIMAL(15, 2),
  l_tax           DECIMAL(15, 2),
  l_returnflag    STRING,
  l_linestatus    STRING,
  l_shipdate      DATE,
  l_commitdate    DATE,
  l_receiptdate   DATE,
  l_shipinstruct  STRING,
  l_shipmode      STRING,
  l_comment       STRING,
  l_shiptime      TIMESTAMP(3),
  WATERMARK FOR l_shiptime AS l_shiptime - INTERVAL '1' DAY
) WITH (
  'connector' = 'kafka',
  'topic' = 'shipments',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE orders_shipped_fast (
  o_orderkey   BIGINT,
  l_linenumber INT,
  o_ordertime  TIMESTAMP(3),
  l_shiptime   TIMESTAMP(3),
  l_quantity   DECIMAL(15, 2),
  l_shipmode   STRING,
  PRIMARY KEY (o_orderkey, l_linenumber) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

CREATE TEMPORARY VIEW placed_orders AS
SELECT o_orderkey, o_ordertime, event_time FROM order_events WHERE op = 'c';

INSERT INTO orders_shipped_fast
SELECT o.o_orderkey, COALESCE(s.l_linenumber, 0), o.o_ordertime, s.l_shiptime, s.l_quantity, s.l_shipmode
FROM placed_orders AS o
LEFT JOIN shipments AS s
  ON o.o_orderkey = s.l_orderkey
  AND s.l_shiptime BETWEEN o.event_time AND o.event_time + INTERVAL '30' DAY;
