"""Test tools for streamjoin (as ``pyspark.testing`` is for PySpark); not part of the engine's API.

- :func:`replay_cases`: run test cases in the ``flink-cases`` format (``tests/data/flink-cases/README.md``)
  through the planner and the operators on Spark, fed as Flink was fed, and write each case's changelog
  (``streamjoin replay`` on the command line);
- :func:`load_case_file`, :func:`case_script`, :func:`replay_case`: one case at a time.
"""

from streamjoin.testing.replay import Case, case_script, load_case_file, replay_case, replay_cases

__all__ = ["Case", "case_script", "load_case_file", "replay_case", "replay_cases"]
