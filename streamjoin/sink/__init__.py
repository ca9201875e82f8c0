"""Where a changelog stream lands: Delta tables (upsert table and raw changelog) and, for tests, the driver."""

from streamjoin.sink.collect import collect_changelog
from streamjoin.sink.delta import CHANGELOG_METADATA, DeltaSink, DeltaUpsertWriter, create_sink_tables

__all__ = ["CHANGELOG_METADATA", "DeltaSink", "DeltaUpsertWriter", "collect_changelog", "create_sink_tables"]
