-- top_open_orders: each customer's three most expensive open orders, kept current.
--
-- A Top-N over a changelog (docs/semantics.md §6.4): the orders' Debezium changelog, filtered to open orders
-- (status 'O'), ranked per customer by total price. An order that is updated, closed or deleted leaves its rank:
-- the orders below it move up one rank, and the customer's fourth open order, if any, enters rank 3 (Flink's
-- RetractStrategy, RetractableTopNFunction). The sink is keyed by customer and rank, an upsert key of the
-- Top-N's output, so each rank holds the order that has it now.

CREATE TABLE top_open_orders (
  o_custkey    BIGINT,
  order_rank   BIGINT,
  o_orderkey   BIGINT,
  o_totalprice DECIMAL(15, 2),
  o_orderdate  DATE,
  PRIMARY KEY (o_custkey, order_rank) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

INSERT INTO top_open_orders
SELECT o_custkey, order_rank, o_orderkey, o_totalprice, o_orderdate
FROM (
  SELECT o_custkey, o_orderkey, o_totalprice, o_orderdate,
    ROW_NUMBER() OVER (PARTITION BY o_custkey ORDER BY o_totalprice DESC, o_orderkey) AS order_rank
  FROM orders
  WHERE o_orderstatus = 'O'
)
WHERE order_rank <= 3;
