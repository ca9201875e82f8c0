"""``make demo``'s output, without running the demo: the summary table at any width, the filtered worker lines."""

import io
import subprocess
import sys
import textwrap

from dagster_project.demo import WORKER_LINE, _width, format_table

HEADER = ("pipeline", "records read", "rows", "changes", "dead letters", "checks")
ROWS = [
    ("orders_current", "16,501", "1,479", "16,500", "1", "3/3 passed"),
    ("a_pipeline_with_a_very_long_name_that_no_terminal_column_fits", "1,234,567", "12", "7", "0", "13/13 passed"),
]


def test_the_summary_keeps_every_value_whole_at_80_columns():
    text = format_table("The SQL pipelines", HEADER, ROWS, 80)
    assert all(len(line) <= 80 for line in text.splitlines() if not line.startswith("a_pipeline"))
    for row in ROWS:
        for cell in row:
            assert cell in text
    # Too wide for aligned columns: one block per pipeline, a value per line.
    assert text.splitlines()[1:8] == [
        "orders_current",
        "  records read: 16,501",
        "  rows:         1,479",
        "  changes:      16,500",
        "  dead letters: 1",
        "  checks:       3/3 passed",
        "a_pipeline_with_a_very_long_name_that_no_terminal_column_fits",
    ]


def test_the_summary_is_aligned_columns_where_they_fit_and_on_a_stream_without_a_width():
    narrow = [("orders_current", "16,501", "1,479", "16,500", "1", "3/3 passed")]
    assert format_table("t", HEADER, narrow, 80).splitlines() == [
        "t",
        "pipeline        records read   rows  changes  dead letters      checks",
        "--------------  ------------  -----  -------  ------------  ----------",
        "orders_current        16,501  1,479   16,500             1  3/3 passed",
    ]
    piped = io.StringIO()  # stdout redirected to a file: no width, nothing cut however long
    assert _width(piped) is None
    lines = format_table("t", HEADER, ROWS, _width(piped)).splitlines()
    assert len(lines) == 3 + len(ROWS) and lines[-1].startswith(ROWS[1][0]) and lines[-1].endswith("13/13 passed")


def test_python_worker_lines_of_child_processes_are_dropped():
    """A child process (as Spark's JVM) writes to the inherited descriptors; only the worker lines go."""
    script = textwrap.dedent(
        f"""
        import subprocess, sys
        from dagster_project.demo import quiet_python_workers
        with quiet_python_workers():
            subprocess.run(["sh", "-c", "printf 'Starting Streaming {WORKER_LINE}.\\\\n\\\\nkept on stderr\\\\n' >&2; "
                                        "printf '{WORKER_LINE} finish init stage\\\\n\\\\nkept on stdout\\\\n'"], check=True)
            print("python's own stderr", file=sys.stderr)
        print("after", file=sys.stderr)
        """  # noqa: E501
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "kept on stdout\n"
    assert result.stderr.splitlines()[-3:] == ["kept on stderr", "python's own stderr", "after"]
    assert WORKER_LINE not in result.stderr
