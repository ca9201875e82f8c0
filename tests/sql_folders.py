"""SQL folders for tests: ``sql/`` pipelines over a copy of the demo catalog with changed table options."""

from pathlib import Path

from assets.sql_pipelines import SQL_DIR


def orders_current_with_orders_options(tmp_path: Path, options: str) -> Path:
    """A folder holding ``orders_current.sql`` and ``catalog/tpch.sql``, whose ``orders`` table declares ``options``
    (lines of ``'key' = 'value',``) after its topic; returns the folder."""
    folder = tmp_path / "sql"
    (folder / "catalog").mkdir(parents=True)
    catalog = (SQL_DIR / "catalog" / "tpch.sql").read_text()
    declared = "'topic' = 'orders',\n"
    assert declared in catalog
    (folder / "catalog" / "tpch.sql").write_text(catalog.replace(declared, declared + options, 1))
    (folder / "orders_current.sql").write_text((SQL_DIR / "orders_current.sql").read_text())
    return folder
