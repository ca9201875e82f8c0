"""The batch query of a pipeline: its SQL run by Spark in batch over the topics' retained records.

An independent computation of what a pipeline's sink table should hold, for checks that compare the
streaming result with it (:func:`batch_query`; the rewrites and the deliberate differences from the
streaming result are in :mod:`streamjoin.batch.query`, the source tables in :mod:`streamjoin.batch.sources`).
"""

from streamjoin.batch.query import BatchPlan, batch_query, plan_batch, run_batch

__all__ = ["BatchPlan", "batch_query", "plan_batch", "run_batch"]
