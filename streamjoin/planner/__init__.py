"""The Flink SQL front end: parse (sqlglot, Flink dialect), plan, infer changelog modes, explain, translate.

Public API:

- :func:`plan_script` / :func:`load_script`: a SQL file, parsed and planned (:class:`Script`);
- :func:`sql_pipelines`: its ``INSERT INTO`` statements as runnable :class:`SqlPipeline` objects;
- :class:`Translator`: a plan to a Spark changelog DataFrame;
- :func:`replay_cases`: run ``flink-cases`` test cases through all of it.
"""

from streamjoin.planner.dialect import Flink
from streamjoin.planner.pipelines import SqlPipeline, bootstrap_servers, sql_pipelines
from streamjoin.planner.replay import replay_cases
from streamjoin.planner.script import PlannedStatement, Script, load_script, plan_script
from streamjoin.planner.translate import Translator

__all__ = [
    "Flink", "Script", "PlannedStatement", "plan_script", "load_script", "SqlPipeline", "sql_pipelines",
    "bootstrap_servers", "Translator", "replay_cases",
]
