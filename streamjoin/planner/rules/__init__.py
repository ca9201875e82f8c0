"""The planner's rules, one module per construct it matches (after Flink's ``FlinkStreamRuleSets``, whose
rules are one Calcite rule class per file).

Each rule is a function taking the :class:`~streamjoin.planner.builder.QueryPlanner` (the catalog, the SQL
source for error locations, ``plan_query`` for nested queries) and the parsed construct, validating it and
returning plan nodes; the planner's ``plan_select`` dispatches to them:

| module | matches | builds |
| --- | --- | --- |
| :mod:`.scan` | a table or view in ``FROM`` | ``TableSourceScan`` (views planned inline) |
| :mod:`.project` | the select list, ``WHERE`` | ``Calc`` (merged into an input Calc) |
| :mod:`.union` | ``UNION ALL`` | ``Union`` |
| :mod:`.joins` | ``JOIN … ON`` | ``IntervalJoin`` or ``Join`` (regular) |
| :mod:`.temporal` | ``JOIN t FOR SYSTEM_TIME AS OF …`` | ``TemporalJoin`` or ``LookupJoin`` |
| :mod:`.subquery` | ``[NOT] IN`` / ``[NOT] EXISTS`` subqueries | ``Join`` semi / anti |
| :mod:`.aggregate` | ``GROUP BY``, aggregates, ``SELECT DISTINCT`` | ``GroupAggregate`` |
| :mod:`.aggregate_join_transpose` | ``GROUP BY`` over a join, one side unique | ``GroupAggregate`` below and above |
| :mod:`.over` | ``agg(…) OVER (… ORDER BY time …)`` | ``OverAggregate`` |
| :mod:`.rank` | ``ROW_NUMBER() OVER (…)`` filtered to a rank range | ``Deduplicate`` / ``Rank`` (Top-N) |
"""

# The rules are called by the planner only; nothing here is public API.
__all__: list[str] = []
