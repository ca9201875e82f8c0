"""OVER aggregation (docs/semantics.md §5): Flink's OVER process functions (:mod:`.functions`) and the Spark operator
(:mod:`.operator`).
"""

from streamjoin.runtime.over_aggregate.operator import over_aggregate

__all__ = ["over_aggregate"]
