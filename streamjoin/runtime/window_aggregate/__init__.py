"""Window aggregation (docs/semantics.md §11): Flink's ``WindowAggOperator`` per group key (:mod:`.function`) and the
Spark operator (:mod:`.operator`).
"""

from streamjoin.runtime.window_aggregate.function import WindowAggFunction, WindowAggState
from streamjoin.runtime.window_aggregate.operator import window_aggregate

__all__ = ["WindowAggFunction", "WindowAggState", "window_aggregate"]
