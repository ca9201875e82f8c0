"""Temporal table joins (docs/semantics.md §4): Flink's ``TemporalRowTimeJoinOperator`` logic (:mod:`.logic`) and the
Spark operators (:mod:`.operator`).
"""

from streamjoin.runtime.temporal_join.logic import (
    TemporalHow,
    TemporalJoinState,
    TemporalProcessTimeJoin,
    TemporalRowTimeJoin,
)
from streamjoin.runtime.temporal_join.operator import TemporalJoinLogic, lookup_join, temporal_join

__all__ = [
    "TemporalHow",
    "TemporalJoinLogic",
    "TemporalJoinState",
    "TemporalProcessTimeJoin",
    "TemporalRowTimeJoin",
    "lookup_join",
    "temporal_join",
]
