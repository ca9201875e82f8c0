"""Group aggregation (docs/semantics.md §6): Flink's ``GroupAggFunction`` (:mod:`.function`) and the Spark operator
(:mod:`.operator`).
"""

from streamjoin.runtime.group_aggregate.function import GroupAggFunction, GroupState
from streamjoin.runtime.group_aggregate.operator import group_aggregate

__all__ = ["GroupAggFunction", "GroupState", "group_aggregate"]
