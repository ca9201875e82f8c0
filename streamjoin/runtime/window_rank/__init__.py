"""Window Top-N (docs/semantics.md §11.3): Flink's ``WindowRankOperator`` per partition key (:mod:`.function`) and
the Spark operator (:mod:`.operator`).
"""

from streamjoin.runtime.window_rank.function import SortKey, WindowRankFunction, WindowRankState
from streamjoin.runtime.window_rank.operator import window_rank

__all__ = ["SortKey", "WindowRankFunction", "WindowRankState", "window_rank"]
