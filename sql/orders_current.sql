-- orders_current: the current version of every TPC-H order.
--
-- The `orders` topic is a Debezium changelog (inserts, status updates, cancellations as deletes),
-- keyed by o_orderkey. The sink's primary key is the source's, so every change is an upsert by
-- key: the planner drops the -U half of each update (DropUpdateBefore) and the materializer
-- applies +I/+U as upserts and -D as deletes.

-- The columns and key of `orders` (Flink's LIKE clause); neither its watermark nor its Kafka options.
CREATE TABLE orders_current WITH (
  'connector' = 'delta'
) LIKE orders (EXCLUDING ALL INCLUDING CONSTRAINTS);

INSERT INTO orders_current
SELECT * FROM orders;
