-- orders_in_eur: every TPC-H order placement with its amount in euros at the ECB rate of its time.
--
-- Two temporal joins (docs/semantics.md §4):
-- * a lookup join (processing time) against the Delta table `customer_currencies`, which gives
--   the customer's nation and currency as of when the order is processed;
-- * an event-time temporal join against the versioned table `rates` (primary key `currency`,
--   watermark on `rate_time`): each order waits until the watermark passes its time, then takes
--   the rate valid at that time. Later rates never change an emitted row.
-- The ECB quotes units of a currency per euro, so amount_eur = amount / rate; EUR itself has no
-- ECB rate (rate 1), and a currency the ECB does not quote (or not yet) gives a null amount.

CREATE TABLE orders_in_eur (
  o_orderkey   BIGINT,
  o_custkey    BIGINT,
  o_ordertime  TIMESTAMP(3),
  o_totalprice DECIMAL(15, 2),
  n_name       STRING,
  currency     STRING,
  rate         DECIMAL(18, 6),
  amount_eur   DECIMAL(17, 2),
  PRIMARY KEY (o_orderkey) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

CREATE TEMPORARY VIEW placed_orders AS
SELECT o.o_orderkey, o.o_custkey, o.o_ordertime, o.o_totalprice, o.event_time, c.n_name, c.currency
FROM order_events AS o
JOIN customer_currencies FOR SYSTEM_TIME AS OF o.proc_time AS c ON o.o_custkey = c.c_custkey
WHERE o.op = 'c';

INSERT INTO orders_in_eur
SELECT
  p.o_orderkey, p.o_custkey, p.o_ordertime, p.o_totalprice, p.n_name, p.currency, r.rate,
  CAST(CASE WHEN p.currency = 'EUR' THEN p.o_totalprice ELSE p.o_totalprice / r.rate END AS DECIMAL(17, 2))
FROM placed_orders AS p
LEFT JOIN rates FOR SYSTEM_TIME AS OF p.event_time AS r ON p.currency = r.currency;
