"""Top-N over a changelog (docs/semantics.md §6.4): Flink's Top-N functions per partition key (:mod:`.function`) and
the Spark operator (:mod:`.operator`).
"""

from streamjoin.runtime.rank.function import RankState, TopNFunction
from streamjoin.runtime.rank.operator import rank

__all__ = ["RankState", "TopNFunction", "rank"]
