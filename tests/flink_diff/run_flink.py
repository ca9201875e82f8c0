"""Run test cases in the ``flink-cases`` format on Apache Flink 2.3.0 (PyFlink, local MiniCluster).

Runs with the Flink venv's python (``.local/flink-venv``, made by ``make flink``), not the
project's: PyFlink pins its own pyarrow/pandas/numpy. Standard library + PyFlink only.

    .local/flink-venv/bin/python tests/flink_diff/run_flink.py CASE.json... --out-dir DIR

writes ``DIR/NAME.json`` per case: ``{"columns": [[name, type]…], "changelog": [[RowKind, values…]…],
"final": [[values…]…]}`` (the ``expected/`` format of ``tests/data/flink-cases/README.md``), or
``{"error": "…"}`` when Flink refuses the query.

Each case is fed as that README says Flink was fed: every table is one source
(``java/ArrivalOrderSource.java``, compiled here with ``javac`` against PyFlink's jars) that emits its rows
one at a time at their turn in the case's ``arrival`` order, each row followed by its table's watermark
``max rowtime seen − delay``; the sources wait ``pace_ms`` after each row so that it is fully processed
before the next (a two-input operator reads its two inputs in no fixed order), and finish together after
the last row, which ends every input with Flink's +∞ watermark. The tables enter SQL through
``fromChangelogStream`` with ``SOURCE_WATERMARK()`` (the source's own watermarks), parallelism 1,
network buffers flushed after every record.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent
JAVA_SOURCE = HERE / "java" / "ArrivalOrderSource.java"
SOURCE_CLASS = "streamjoin.flinkdiff.ArrivalOrderSource"
_MODES = {"insert_only": "insert_only", "all": "all", "upsert": "upsert"}
_SET = re.compile(r"\s*SET\s+'([^']+)'\s*=\s*'([^']*)'\s*;?\s*", re.IGNORECASE)


def build_source_jar(work: Path) -> Path:
    """Compile ``ArrivalOrderSource.java`` against PyFlink's jars into ``work/arrival-order-source.jar`` (when
    stale)."""
    import pyflink

    jar = work / "arrival-order-source.jar"
    if jar.exists() and jar.stat().st_mtime >= JAVA_SOURCE.stat().st_mtime:
        return jar
    classes = work / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    lib = Path(pyflink.__file__).parent / "lib"
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{lib}/*", str(JAVA_SOURCE)], check=True)
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    return jar


def _type_root(flink_type: str) -> str:
    return flink_type.split("(")[0].strip().upper()


class FlinkRunner:
    """One local Flink (gateway JVM + MiniCluster per job) that runs cases one after the other.

    Args:
        work: where the source jar is built.
        pace_ms: wait after each row (ms) before the next row of any table.
        setup: statements run before every case's own setup (settings only Flink has).
    """

    def __init__(self, work: Path, pace_ms: int = 30, setup: list[str] | None = None):
        jar = build_source_jar(work)
        # PyFlink's gateway puts FLINK_TEST_LIBS on its JVM's classpath when FLINK_TESTING is set.
        os.environ["FLINK_TESTING"] = "1"
        os.environ["FLINK_TEST_LIBS"] = str(jar)
        from pyflink.java_gateway import get_gateway

        self.gateway = get_gateway()
        self.jvm = self.gateway.jvm
        self.pace_ms = pace_ms
        self.setup = list(setup or [])

    # -- rows as Java objects ---------------------------------------------------------------
    def _type_info(self, flink_type: str):
        """The Java ``TypeInformation`` of a column of SQL type ``flink_type``."""
        name = {
            "TINYINT": "BYTE",
            "SMALLINT": "SHORT",
            "INT": "INT",
            "INTEGER": "INT",
            "BIGINT": "LONG",
            "FLOAT": "FLOAT",
            "DOUBLE": "DOUBLE",
            "BOOLEAN": "BOOLEAN",
            "DECIMAL": "BIG_DEC",
            "STRING": "STRING",
            "VARCHAR": "STRING",
            "CHAR": "STRING",
            "DATE": "LOCAL_DATE",
            "TIMESTAMP": "LOCAL_DATE_TIME",
            "TIMESTAMP_LTZ": "INSTANT",
        }[_type_root(flink_type)]
        return getattr(self.jvm.org.apache.flink.api.common.typeinfo.Types, name)

    def _source(self, env, run_id: str, table: dict, arrivals: list[int], total: int):
        jvm, gw = self.jvm, self.gateway
        columns = [tuple(c) for c in table["columns"]]
        names = [c for c, _ in columns]
        infos = [self._type_info(t) for _, t in columns]
        if table.get("seq_column"):
            names.append(table["seq_column"])
            infos.append(self._type_info("BIGINT"))
        rowtime = (table.get("rowtime") or {}).get("column")
        rows = jvm.java.util.ArrayList()
        j_arrivals = gw.new_array(jvm.long, len(arrivals))
        j_rowtimes = gw.new_array(jvm.long, len(arrivals))
        roots = [_type_root(t) for _, t in columns] + (["BIGINT"] if table.get("seq_column") else [])
        j_roots = gw.new_array(jvm.String, len(roots))
        for j, root in enumerate(roots):
            j_roots[j] = root
        for i, (row, index) in enumerate(zip(table["rows"], arrivals)):
            values = list(row[1:]) + ([index] if table.get("seq_column") else [])
            array = gw.new_array(jvm.Object, len(values))
            for j, v in enumerate(values):
                array[j] = v
            rows.add(jvm.streamjoin.flinkdiff.ArrivalOrderSource.row(row[0], array, j_roots))
            j_arrivals[i] = index
            if rowtime:
                ts = row[1 + [c for c, _ in columns].index(rowtime)]
                j_rowtimes[i] = _epoch_ms(ts)
        source = jvm.streamjoin.flinkdiff.ArrivalOrderSource(
            run_id,
            rows,
            j_arrivals,
            j_rowtimes,
            bool(rowtime),
            int((table.get("rowtime") or {}).get("watermark_delay_ms", 0)),
            total,
            self.pace_ms,
        )
        j_names = gw.new_array(jvm.String, len(names))
        j_infos = gw.new_array(jvm.org.apache.flink.api.common.typeinfo.TypeInformation, len(infos))
        for i, (n, info) in enumerate(zip(names, infos)):
            j_names[i], j_infos[i] = n, info
        type_info = jvm.org.apache.flink.api.common.typeinfo.Types.ROW_NAMED(j_names, j_infos)
        from pyflink.datastream import DataStream

        return DataStream(env._j_stream_execution_environment.addSource(source, table["name"], type_info))

    def _start_when_running(self, job_client, run_id: str, timeout_s: float = 120.0) -> None:
        """Open the sources' gate once every task of the job runs (``TimeoutError`` after ``timeout_s``)."""
        source = self.jvm.streamjoin.flinkdiff.ArrivalOrderSource
        deadline = time.monotonic() + timeout_s
        while not source.allTasksRunning(job_client._j_job_client):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the job's tasks did not all start within {timeout_s} s")
            time.sleep(0.02)
        source.start(run_id)

    # -- one case --------------------------------------------------------------------------
    def run_case(self, case: dict) -> dict:
        """Run one case on Flink; its result document (``{"error": …}`` when Flink refuses or fails)."""
        from pyflink.common import Configuration
        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink.table import ChangelogMode, Schema, StreamTableEnvironment

        config = Configuration()
        config.set_string("parallelism.default", "1")
        config.set_string("execution.buffer-timeout.interval", "0 ms")
        env = StreamExecutionEnvironment.get_execution_environment(config)
        env.set_parallelism(1)
        env.set_buffer_timeout(0)
        t_env = StreamTableEnvironment.create(env)
        t_env.get_config().set("table.local-time-zone", "UTC")
        t_env.get_config().set("table.exec.resource.default-parallelism", "1")
        run_id = f"{case.get('name', 'case')}-{uuid.uuid4()}"
        arrival = case.get("arrival") or [t["name"] for t in case["tables"] for _ in t["rows"]]
        indices: dict[str, list[int]] = {t["name"]: [] for t in case["tables"]}
        for index, name in enumerate(arrival):
            indices[name].append(index)
        try:
            for table in case["tables"]:
                stream = self._source(env, run_id, table, indices[table["name"]], len(arrival))
                schema = Schema.new_builder()
                for column, flink_type in table["columns"]:
                    # A primary key's columns are NOT NULL, as in a CREATE TABLE.
                    key = column in table.get("primary_key", ())
                    schema.column(column, f"{flink_type} NOT NULL" if key else flink_type)
                if table.get("seq_column"):
                    schema.column(table["seq_column"], "BIGINT")
                if table.get("proctime"):
                    schema.column_by_expression(table["proctime"], "PROCTIME()")
                if table.get("rowtime"):
                    schema.watermark(table["rowtime"]["column"], "SOURCE_WATERMARK()")
                if table.get("primary_key"):
                    schema.primary_key(*table["primary_key"])
                mode = table.get("changelog_mode") or (
                    "insert_only" if all(r[0] == "+I" for r in table["rows"]) else "all"
                )
                t_env.create_temporary_view(
                    table["name"], t_env.from_changelog_stream(stream, schema.build(), getattr(ChangelogMode, mode)())
                )
            for statement in [*self.setup, *case.get("setup", [])]:
                setting = _SET.fullmatch(statement)
                if setting:  # as Flink's SQL client runs a SET: the table environment's executeSql has no SET
                    t_env.get_config().set(setting.group(1), setting.group(2))
                else:
                    t_env.execute_sql(statement)
            result_table = t_env.sql_query(case["query"])
            columns = [
                [c.getName(), _type_name(c.getDataType().getLogicalType().asSummaryString())]
                for c in result_table._j_table.getResolvedSchema().getColumns()
            ]
            precisions = [
                _precision(c.getDataType().getLogicalType().asSummaryString())
                for c in result_table._j_table.getResolvedSchema().getColumns()
            ]
            changelog = []
            result = result_table.execute()
            self._start_when_running(result.get_job_client(), run_id)
            with result.collect() as results:
                for row in results:
                    changelog.append([str(row.get_row_kind()), *[_format(v, p) for v, p in zip(row, precisions)]])
        except Exception as e:  # noqa: BLE001 - Flink refuses the query (planner) or the job fails
            message = str(e).strip().splitlines()
            return {"error": f"{type(e).__name__}: {_root_cause(e) or (message[0] if message else '')}"}
        finally:
            self.jvm.streamjoin.flinkdiff.ArrivalOrderSource.release(run_id)
        return {
            "name": case.get("name"),
            "flink_version": _flink_version(),
            "query": case["query"],
            "columns": columns,
            "changelog": changelog,
            "final": materialize(changelog),
        }


def _flink_version() -> str:
    from importlib.metadata import version

    return version("apache-flink")


def _root_cause(e: Exception) -> str:
    """The Java exception's innermost message (Py4J errors carry the Java stack as text)."""
    java = getattr(e, "java_exception", None)
    if java is None:
        return ""
    while java.getCause() is not None:
        java = java.getCause()
    return f"{java.getClass().getName()}: {java.getMessage()}"


def _type_name(summary: str) -> str:
    """Flink's type summary without parameters, nullability or time-attribute marks: ``VARCHAR``, ``TIMESTAMP``…"""
    text = summary.replace("*ROWTIME*", "").replace("*PROCTIME*", "").replace("NOT NULL", "").strip()
    name = text.split("(")[0].strip()
    return "VARCHAR" if name == "STRING" else name


def _precision(summary: str) -> int | None:
    if not summary.startswith("TIMESTAMP"):
        return None
    return int(summary.split("(")[1].split(")")[0]) if "(" in summary else 6


def _epoch_ms(text: str) -> int:
    value = dt.datetime.fromisoformat(text.replace("T", " ")).replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


def _format(value, precision: int | None):
    """A value as the expected files hold it: timestamps as UTC text with ``precision`` decimals, DECIMALs as text."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        text = value.strftime("%Y-%m-%d %H:%M:%S.%f")
        p = 3 if precision is None else min(precision, 6)
        return text[: 20 + p] if p else text[:19]
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return value


def _sort_key(row):
    return [(v is not None, str(type(v)), v if v is not None else 0) for v in row]


def materialize(changelog: list[list]) -> list[list] | dict:
    """The changelog applied as a multiset (``+I``/``+U`` add a row, ``-U``/``-D`` remove one), sorted."""
    counts: dict[str, int] = {}
    for kind, *values in changelog:
        key = json.dumps(values)
        counts[key] = counts.get(key, 0) + (1 if kind in ("+I", "+U") else -1)
        if counts[key] < 0:
            return {"error": f"the changelog retracts a row it does not hold: {values}"}
    rows = [json.loads(k) for k, n in counts.items() for _ in range(n)]
    return sorted(rows, key=_sort_key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", type=Path)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path(".local/flink-diff"), help="where the source jar is built")
    parser.add_argument(
        "--pace-ms", type=int, default=30, help="wait after each row (ms) before the next row of any table"
    )
    parser.add_argument(
        "--setup",
        action="append",
        default=[],
        metavar="SQL",
        help="a statement run before every case's own setup (e.g. a SET only Flink knows); repeatable",
    )
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    runner = FlinkRunner(args.work, args.pace_ms, setup=args.setup)
    for path in args.cases:
        case = json.loads(path.read_text())
        name = case.get("name", path.stem)
        result = runner.run_case(case)
        (args.out_dir / f"{path.stem}.json").write_text(json.dumps(result, indent=1) + "\n")
        outcome = f"error: {result['error'][:200]}" if "error" in result else f"{len(result['changelog'])} changes"
        print(f"{name}: {outcome}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
