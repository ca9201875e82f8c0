"""The interval join (docs/semantics.md §3): Flink's ``TimeIntervalJoin`` (:mod:`.logic`), the Spark operator
(:mod:`.operator`) and the padding step after a residual predicate on the python engine (:mod:`.residual`).
"""

from streamjoin.runtime.interval_join.logic import (
    IntervalBounds,
    IntervalJoinState,
    JoinHow,
    ProcTimeIntervalJoin,
    RowTimeIntervalJoin,
    TimeIntervalJoin,
)
from streamjoin.runtime.interval_join.operator import IntervalJoinLogic, interval_join

__all__ = [
    "IntervalBounds",
    "IntervalJoinLogic",
    "IntervalJoinState",
    "JoinHow",
    "ProcTimeIntervalJoin",
    "RowTimeIntervalJoin",
    "TimeIntervalJoin",
    "interval_join",
]
