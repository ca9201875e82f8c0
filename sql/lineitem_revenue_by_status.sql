-- lineitem_revenue_by_status: per order status, the line items of current orders and their revenue, kept current.
--
-- A chain of two stateful operators: a regular join of two Debezium changelogs (each line item with
-- its current order, docs/semantics.md §2) feeding a group aggregate that consumes the join's
-- retractions (§6). An order's status change retracts its line items' joined rows from one group and
-- adds them to another; a line item's update or delete retracts it from its group. A micro-batch holds
-- thousands of such changes from many join keys for each of the three groups: every operator keeps
-- Flink's order across them (`_seq`, §1.1), so the changelog table is valid change by change.

CREATE TABLE lineitem_revenue_by_status (
  o_orderstatus STRING,
  line_count    BIGINT,
  order_count   BIGINT,
  revenue       DECIMAL(38, 2),
  max_quantity  DECIMAL(15, 2),
  PRIMARY KEY (o_orderstatus) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

INSERT INTO lineitem_revenue_by_status
SELECT o.o_orderstatus, COUNT(*), COUNT(DISTINCT o.o_orderkey), SUM(l.l_extendedprice), MAX(l.l_quantity)
FROM lineitem AS l
JOIN orders AS o ON l.l_orderkey = o.o_orderkey
GROUP BY o.o_orderstatus;
