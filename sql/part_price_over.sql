-- part_price_over: for each shipped line item, the highest retail price among line items of the
-- same part type, over two frames (docs/semantics.md §5.4, its tmall_item example on TPC-H):
--   frame 'ROWS 2 PRECEDING'  — this line item and the 2 before it (by ship time) of its type;
--   frame 'RANGE 7 DAYS'      — every line item of its type shipped in the 7 days up to it.
-- Flink computes one OVER window per SELECT, so each frame is its own OverAggregate and the two
-- are a UNION ALL into one table keyed by (line item, frame). Rows are emitted in ship-time order
-- once the watermark passes them; the part's type and price come from a lookup join against the
-- Delta table 'part' (processing time).

CREATE TABLE part_price_over (
  l_orderkey    BIGINT,
  l_linenumber  INT,
  frame         STRING,
  p_type        STRING,
  l_shiptime    TIMESTAMP(3),
  p_retailprice DECIMAL(15, 2),
  max_price     DECIMAL(15, 2),
  PRIMARY KEY (l_orderkey, l_linenumber, frame) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

CREATE TEMPORARY VIEW priced_shipments AS
SELECT s.l_orderkey, s.l_linenumber, s.l_shiptime, p.p_type, p.p_retailprice
FROM shipments AS s
JOIN part FOR SYSTEM_TIME AS OF s.proc_time AS p ON s.l_partkey = p.p_partkey;

INSERT INTO part_price_over
SELECT l_orderkey, l_linenumber, 'ROWS 2 PRECEDING', p_type, l_shiptime, p_retailprice,
  MAX(p_retailprice) OVER (PARTITION BY p_type ORDER BY l_shiptime ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)
FROM priced_shipments
UNION ALL
SELECT l_orderkey, l_linenumber, 'RANGE 7 DAYS', p_type, l_shiptime, p_retailprice,
  MAX(p_retailprice) OVER (PARTITION BY p_type ORDER BY l_shiptime RANGE BETWEEN INTERVAL '7' DAY PRECEDING AND CURRENT ROW)
FROM priced_shipments;
