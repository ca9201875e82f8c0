"""Dagster assets: the SQL pipelines of ``sql/`` (:mod:`assets.sql_pipelines`) and the TPC-H dimension tables."""

from assets.sql_pipelines import load_sql_pipelines, pipeline_assets, topic_specs
from assets.tpch_dimensions import customer_currencies, part

__all__ = ["customer_currencies", "load_sql_pipelines", "part", "pipeline_assets", "topic_specs"]
