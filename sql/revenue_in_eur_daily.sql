-- revenue_in_eur_daily: each day's euro revenue of the TPC-H order placements per currency, at the ECB rate valid at
-- each order's time; one row per day and currency once the watermark has passed the day.
--
-- A chain of event-time operators (docs/semantics.md §11.6): the event-time temporal join against the versioned
-- table `rates` keeps the order's rowtime `event_time` a time attribute, and a TUMBLE window of one day over it sums
-- the day's converted amounts. The join releases each order when the watermark reaches its time; the day's window
-- takes those rows before that watermark fires it, as Flink's window operator after a temporal join does.

CREATE TABLE revenue_in_eur_daily (
  currency     STRING,
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  order_count  BIGINT,
  revenue_eur  DECIMAL(38, 2),
  PRIMARY KEY (currency, window_start, window_end) NOT ENFORCED
) WITH (
  'connector' = 'delta'
);

CREATE TEMPORARY VIEW placed_in_eur AS
SELECT
  p.currency, p.event_time,
  CAST(CASE WHEN p.currency = 'EUR' THEN p.o_totalprice ELSE p.o_totalprice / r.rate END AS DECIMAL(17, 2)) AS amount_eur
FROM (
  SELECT o.o_totalprice, o.event_time, c.currency
  FROM order_events AS o
  JOIN customer_currencies FOR SYSTEM_TIME AS OF o.proc_time AS c ON o.o_custkey = c.c_custkey
  WHERE o.op = 'c'
) AS p
LEFT JOIN rates FOR SYSTEM_TIME AS OF p.event_time AS r ON p.currency = r.currency;

INSERT INTO revenue_in_eur_daily
SELECT currency, window_start, window_end, COUNT(*) AS order_count, SUM(amount_eur) AS revenue_eur
FROM TABLE(TUMBLE(TABLE placed_in_eur, DESCRIPTOR(event_time), INTERVAL '1' DAY))
GROUP BY currency, window_start, window_end;
