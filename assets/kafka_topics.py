"""The Kafka topics the pipelines read, as external assets (Dagster does not produce them)."""

from dagster import AssetKey, AssetSpec

from streamjoin.connectors.kafka import KafkaSource
from streamjoin.datagen.topics import LINEITEM, ORDERS, RATES

__all__ = ["topic_key", "TOPIC_SPECS"]


def topic_key(source: KafkaSource) -> AssetKey:
    return AssetKey(["kafka", source.topic])


TOPIC_SPECS = [
    AssetSpec(
        topic_key(source),
        description=f"Kafka topic `{source.topic}` ({source.format}), table `{source.name}`.",
        group_name="kafka",
        kinds={"kafka"},
        metadata={
            "format": source.format,
            "primary_key": ", ".join(source.primary_key),
            "rowtime": source.rowtime or "",
            "watermark_delay_ms": source.watermark_delay_ms,
            "columns": ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in source.schema.fields),
        },
    )
    for source in (ORDERS, LINEITEM, RATES)
]
