"""Deduplication (docs/semantics.md §6): Flink's deduplicate functions (:mod:`.functions`) and the Spark operator
(:mod:`.operator`).
"""

from streamjoin.runtime.deduplicate.functions import (
    DeduplicateFunction,
    DedupState,
    ProcTimeDeduplicateKeepFirstRowFunction,
    ProcTimeDeduplicateKeepLastRowFunction,
    RowTimeDeduplicateKeepFirstRowFunction,
    RowTimeDeduplicateKeepLastRowFunction,
    deduplicate_function,
)
from streamjoin.runtime.deduplicate.operator import deduplicate

__all__ = [
    "DedupState",
    "DeduplicateFunction",
    "ProcTimeDeduplicateKeepFirstRowFunction",
    "ProcTimeDeduplicateKeepLastRowFunction",
    "RowTimeDeduplicateKeepFirstRowFunction",
    "RowTimeDeduplicateKeepLastRowFunction",
    "deduplicate",
    "deduplicate_function",
]
