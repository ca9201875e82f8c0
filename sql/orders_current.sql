-- orders_current: the current version of every TPC-H order.
--
-- The `orders` topic is a Debezium changelog (inserts, status updates, cancellations as deletes),
-- keyed by o_orderkey. The sink's primary key is the source's, so every change is an upsert by
-- key: the planner drops the -U half of each update (DropUpdateBefore) and the materializer
-- applies +I/+U as upserts and -D as deletes.

CREATE TABLE orders_current (
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
  PRIMARY KEY (o_orderkey) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

INSERT INTO orders_current
SELECT * FROM orders;
