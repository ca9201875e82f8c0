-- orders_by_status: how many orders are in each status, and their total price, kept current.
--
-- The shape of the worked example of docs/semantics.md §1.6 on TPC-H: the latest event of each order (a rowtime
-- deduplication keeping the last row: an order's later event retracts its earlier one with -U/+U),
-- cancellations filtered out after it (a cancelled order's -U passes, its +U does not: the order
-- leaves its group), then a group aggregate that consumes those retractions.
--
-- Three groups take every order event: in mini-batch mode each emits one -U/+U pair per micro-batch
-- instead of one per event (docs/semantics.md §6.1), so the sink's MERGE and changelog stay small.

SET 'table.exec.mini-batch.enabled' = 'true';

CREATE TABLE orders_by_status (
  o_orderstatus STRING,
  order_count   BIGINT,
  total_price   DECIMAL(38, 2),
  PRIMARY KEY (o_orderstatus) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

CREATE TEMPORARY VIEW latest_order_events AS
SELECT o_orderkey, o_orderstatus, o_totalprice, op
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY o_orderkey ORDER BY event_time DESC) AS rn
  FROM order_events
)
WHERE rn = 1;

INSERT INTO orders_by_status
SELECT o_orderstatus, COUNT(DISTINCT o_orderkey), SUM(o_totalprice)
FROM latest_order_events
WHERE op <> 'd'
GROUP BY o_orderstatus;
