"""SinkUpsertMaterializer (docs/semantics.md §1): the logic (:mod:`.logic`) and the Spark operator
(:mod:`.operator`)."""

from streamjoin.runtime.upsert_materializer.logic import SinkUpsertMaterializer
from streamjoin.runtime.upsert_materializer.operator import sink_upsert_materialize

__all__ = ["SinkUpsertMaterializer", "sink_upsert_materialize"]
