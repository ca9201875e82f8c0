-- lineitem_with_order: every TPC-H line item with its current order.
--
-- A LEFT regular join (docs/semantics.md §2) of two Debezium changelogs: an order's update retracts
-- its line items' joined rows and emits them again with the new order; a line item whose order is
-- not (or no longer) there carries nulls, and is retracted and re-emitted when its order arrives.
-- The sink key (l_orderkey, l_linenumber) is an upsert key of the join output (the line item's key
-- contains the join key), so no SinkUpsertMaterializer is needed.

-- The columns and key of `lineitem` (Flink's LIKE clause), then those of `orders`.
CREATE TABLE lineitem_with_order (
  o_orderkey      BIGINT,
  o_custkey       BIGINT,
  o_orderstatus   STRING,
  o_totalprice    DECIMAL(15, 2),
  o_orderdate     DATE,
  o_ordertime     TIMESTAMP(3),
  o_orderpriority STRING,
  o_clerk         STRING,
  o_shippriority  INT,
  o_comment       STRING
) WITH (
  'connector' = 'delta'
) LIKE lineitem (EXCLUDING ALL INCLUDING CONSTRAINTS);

INSERT INTO lineitem_with_order
SELECT *
FROM lineitem AS l
LEFT JOIN orders AS o ON l.l_orderkey = o.o_orderkey;
