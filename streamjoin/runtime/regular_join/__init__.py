"""The regular streaming join with retraction (docs/semantics.md §2): Flink's ``StreamingJoinOperator`` decision tree
(:mod:`.streaming_join`), its ``JoinRecordStateViews`` (:mod:`.state_views`) and the Spark operator
(:mod:`.operator`).
"""

from streamjoin.runtime.regular_join.operator import regular_join

__all__ = ["regular_join"]
