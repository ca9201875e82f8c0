"""Window join (docs/semantics.md §11.4): Flink's ``WindowJoinOperator`` per join key (:mod:`.function`) and the
Spark operator (:mod:`.operator`).
"""

from streamjoin.runtime.window_join.function import WindowJoinFunction, WindowJoinHow, WindowJoinState
from streamjoin.runtime.window_join.operator import WindowJoinLogic, window_join

__all__ = ["WindowJoinFunction", "WindowJoinHow", "WindowJoinLogic", "WindowJoinState", "window_join"]
