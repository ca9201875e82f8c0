"""The Flink SQL front end: parse (sqlglot, Flink dialect), plan, infer changelog modes, explain, translate.

Public API:

- :func:`plan_script` / :func:`load_script`: a SQL text or file, parsed and planned (:class:`Script`, its
  statements :class:`PlannedStatement` with their plans and EXPLAIN text);
- :func:`sql_pipelines`: a script's ``INSERT INTO`` statements as runnable :class:`SqlPipeline` objects;
  :func:`bootstrap_servers`: the Kafka servers they declare;
- :class:`Translator`: a plan to a Spark changelog DataFrame;
- :class:`Flink`: the sqlglot dialect, to parse or print Flink SQL.

The planner's parts (rules, plan nodes, metadata) are importable from their modules; the case replay
test tool is :mod:`streamjoin.testing`.
"""

from streamjoin.planner.dialect import Flink
from streamjoin.planner.pipelines import SqlPipeline, bootstrap_servers, sql_pipelines
from streamjoin.planner.script import PlannedStatement, Script, load_script, plan_script
from streamjoin.planner.translate import Translator

__all__ = [
    "Flink",
    "PlannedStatement",
    "Script",
    "SqlPipeline",
    "Translator",
    "bootstrap_servers",
    "load_script",
    "plan_script",
    "sql_pipelines",
]
