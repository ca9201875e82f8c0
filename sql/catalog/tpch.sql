-- The tables of the TPC-H demo, shared by the pipelines of sql/ (an initialization script: only
-- CREATE and SET, planned before each pipeline, as Flink's `sql-client.sh -i`).
--
-- Kafka topics (filled by the `load_tpch_topics_job`; streamjoin/datagen/topics.py reads their
-- columns, keys and watermarks from here):
--   orders, lineitem   CDC changelogs of the two tables (debezium-json): inserts, updates, deletes;
--   order_events       every placement (op 'c'), update ('u') and cancellation ('d') of an order as
--                      an append-only event with its own time, in event-time order;
--   shipments          every line item once, when it ships (append-only);
--   rates              ECB reference rates: units of `currency` per euro, from `rate_time` on.
-- Delta tables (Dagster assets `customer_currencies` and `part`, assets/tpch_dimensions.py), read
-- by lookup joins: each customer's nation and currency; the TPC-H part table.
-- Every time is UTC; TPC-H dates are shifted by 3653 days into the ECB period (2002-2008).

CREATE TABLE orders (
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
  WATERMARK FOR o_ordertime AS o_ordertime - INTERVAL '1' DAY,
  PRIMARY KEY (o_orderkey) NOT ENFORCED
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'format' = 'debezium-json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE lineitem (
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
  WATERMARK FOR l_shiptime AS l_shiptime - INTERVAL '1' DAY,
  PRIMARY KEY (l_orderkey, l_linenumber) NOT ENFORCED
) WITH (
  'connector' = 'kafka',
  'topic' = 'lineitem',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'format' = 'debezium-json',
  'scan.startup.mode' = 'earliest-offset'
);

-- The event streams carry the columns of the CDC tables: declared LIKE them (Flink's LIKE clause),
-- without their primary key (an event stream has none) and, for order_events, with a watermark
-- on the event's own time; the Kafka options are the source table's but for topic and format.
CREATE TABLE order_events (
  op         STRING,
  event_time TIMESTAMP(3),
  proc_time AS PROCTIME(),
  WATERMARK FOR event_time AS event_time - INTERVAL '1' DAY
) WITH (
  'topic' = 'order_events',
  'format' = 'json'
) LIKE orders (EXCLUDING CONSTRAINTS EXCLUDING WATERMARKS);

CREATE TABLE shipments (
  proc_time AS PROCTIME()
) WITH (
  'topic' = 'shipments',
  'format' = 'json'
) LIKE lineitem (EXCLUDING CONSTRAINTS);

CREATE TABLE rates (
  currency  STRING,
  rate      DECIMAL(18, 6),
  rate_time TIMESTAMP(3),
  WATERMARK FOR rate_time AS rate_time,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH (
  'connector' = 'kafka',
  'topic' = 'rates',
  'properties.bootstrap.servers' = '127.0.0.1:9092',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE customer_currencies (
  c_custkey BIGINT,
  n_name    STRING,
  currency  STRING,
  PRIMARY KEY (c_custkey) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

CREATE TABLE part (
  p_partkey     BIGINT,
  p_name        STRING,
  p_brand       STRING,
  p_type        STRING,
  p_size        INT,
  p_retailprice DECIMAL(15, 2),
  PRIMARY KEY (p_partkey) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);
