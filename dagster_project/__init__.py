"""The Dagster code location (``workspace.yaml``): :data:`dagster_project.definitions.defs`."""

__all__: list[str] = []
