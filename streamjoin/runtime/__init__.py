"""The Python engine's operators: Flink SQL's streaming operators on Spark's ``transformWithState``.

Each operator is a function from changelog DataFrames (data columns +
``_rowkind`` + ``_seq``) to a changelog DataFrame, documented with the columns
it takes and gives. Inside, every stateful one is a per-key logic object
(plain Python, the executable specification) run by the one
``StatefulProcessor`` of :mod:`streamjoin.runtime.processor`.
"""

from streamjoin.runtime.aggregates import AggregateCall
from streamjoin.runtime.changelog_normalize import changelog_normalize
from streamjoin.runtime.deduplicate import deduplicate
from streamjoin.runtime.group_aggregate import group_aggregate
from streamjoin.runtime.interval_join import IntervalBounds, interval_join
from streamjoin.runtime.over_aggregate import over_aggregate
from streamjoin.runtime.processor import LATE_STATE, Element, KeyedLogic, KeyedProcessor
from streamjoin.runtime.regular_join import regular_join
from streamjoin.runtime.temporal_join import lookup_join, temporal_join
from streamjoin.runtime.timers import TimerService
from streamjoin.runtime.upsert_materializer import sink_upsert_materialize

__all__ = [
    "LATE_STATE",
    "AggregateCall",
    "Element",
    "IntervalBounds",
    "KeyedLogic",
    "KeyedProcessor",
    "TimerService",
    "changelog_normalize",
    "deduplicate",
    "group_aggregate",
    "interval_join",
    "lookup_join",
    "over_aggregate",
    "regular_join",
    "sink_upsert_materialize",
    "temporal_join",
]
