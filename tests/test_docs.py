"""The documentation names what exists: paths, Python names, the README's size, and no work-log references.

Fast and without Spark: it reads README.md, sql/README.md and docs/*.md, and

- every repository path they name in backticks or in a Markdown link exists (relative to the repository
  root or to the page's folder; a shortened one, as ``runtime/processor.py`` or a bare file name, ends the
  path of an existing file or folder; placeholders such as ``sql/NAME.sql`` or ``<sink>`` and the files
  that ``make setup`` or a run creates, under ``.local/``, ``.venv/`` or ``gx/uncommitted/``, are not
  checked);
- every dotted name of the project's Python packages (``streamjoin.planner.sql_pipelines``) imports as a
  module or resolves to an attribute of one; a ``streamjoin.*`` name that is a class of the operators jar
  (``streamjoin.operators.Operators``) is found in its Scala sources;
- README.md stays a newcomer's page: at most 15,000 bytes;
- neither the docs nor the code refer to work periods by ordinal or to tracker numbers.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "sql" / "README.md", *(ROOT / "docs").glob("*.md")])

#: Created by `make setup` or by runs, not committed.
GENERATED = (".local/", ".venv/", "gx/uncommitted/", "spark-warehouse", "jvm/operators/target")
#: Upper-case words the docs use as placeholders in paths (`sql/NAME.sql`, `streamjoin/runtime/NAME.py`).
PLACEHOLDERS = {"NAME", "PIPELINE", "CASE", "DIR", "FILE", "INIT", "ROOT", "TABLE"}
PATH_SUFFIXES = (".py", ".scala", ".sql", ".md", ".toml", ".yaml", ".yml", ".json", ".xml", ".png", ".csv")
#: The project's Python packages: a dotted name starting with one of these must resolve.
PACKAGES = ("streamjoin", "checks", "assets", "jobs", "resources", "dagster_project", "bench")
SCALA_ROOT = ROOT / "jvm" / "operators" / "src" / "main" / "scala"

#: Work periods named by an ordinal, and tracker entries named by number (not "and session windows": no ordinal).
WORKLOG = re.compile(
    r"[Ii]ssue [0-9]+|\b(?:[0-9]+(?:st|nd|rd|th)|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth"
    r"|eleventh|twelfth|[a-z]+teenth|[a-z]+ieth) session"
)
WORKLOG_SCOPE = ("README.md", "sql/README.md", "docs", "bench", "streamjoin", "jvm", "tests")
WORKLOG_SKIP_DIRS = {"__pycache__", "target", ".pytest_cache", ".hypothesis"}

README_LIMIT = 15_000


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (commands and output, not references)."""
    return re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)


def _spans(page: Path) -> list[str]:
    text = _prose(page)
    spans = re.findall(r"`([^`\n]+)`", text)
    links = [t.split("#", 1)[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)]
    return spans + [link for link in links if link]


def _looks_like_path(span: str) -> bool:
    if not re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_./\-]*", span) or "://" in span or ".." == span:
        return False
    if span.startswith(GENERATED) or any(part in PLACEHOLDERS for part in re.split(r"[/.]", span)):
        return False
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+", span) and not span.endswith(PATH_SUFFIXES):
        return False  # a dotted name (a module, a Spark setting), not a file
    return "/" in span or span.endswith(PATH_SUFFIXES)


def _repo_paths() -> set[str]:
    """Every file of the work tree that git does not ignore, and every folder above one."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = set()
    for line in out.splitlines():
        parts = line.split("/")
        paths.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return paths


def _exists(span: str, page: Path, paths: set[str]) -> bool:
    """At the root or beside the page; else a shortened path (`runtime/processor.py`, `rules/`, `conftest.py`)
    that ends an existing one."""
    if any((base / span).exists() for base in (ROOT, page.parent)):
        return True
    tail = span.rstrip("/")
    return any(p == tail or p.endswith("/" + tail) for p in paths)


def test_every_path_the_docs_name_exists():
    paths = _repo_paths()
    missing = [
        f"{page.relative_to(ROOT)}: `{span}`"
        for page in PAGES
        for span in dict.fromkeys(_spans(page))
        if _looks_like_path(span) and not _exists(span, page, paths)
    ]
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


def _dotted_names(page: Path) -> list[str]:
    pattern = re.compile(r"^(?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
    names = []
    for span in _spans(page):
        match = pattern.match(span)
        if match and not span.endswith(PATH_SUFFIXES):
            names.append(match.group(0))
    return names


def _scala_class(dotted: str) -> bool:
    """A package of the operators jar (``streamjoin.hadoop``), or a class, object or trait in one, with a member
    after it (``streamjoin.operators.Operators.apply``): the Scala sources declare it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        folder = SCALA_ROOT.joinpath(*parts[:cut])
        if not folder.is_dir():
            continue
        if cut == len(parts):
            return True
        declared = re.compile(rf"\b(class|object|trait)\s+{re.escape(parts[cut])}\b")
        return any(declared.search(f.read_text(encoding="utf-8")) for f in folder.rglob("*.scala"))
    return False


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def test_every_python_name_the_docs_name_resolves():
    from pyspark import SparkContext

    running = SparkContext._active_spark_context  # another test of this worker's may have started one
    unresolved = [
        f"{page.relative_to(ROOT)}: `{name}`"
        for page in PAGES
        for name in dict.fromkeys(_dotted_names(page))
        if not (_resolves(name) or _scala_class(name))
    ]
    assert not unresolved, "dotted names in the docs that resolve to nothing:\n" + "\n".join(unresolved)
    assert SparkContext._active_spark_context is running, "resolving the docs' names started Spark"


def test_readme_is_a_newcomers_page():
    size = (ROOT / "README.md").stat().st_size
    assert size <= README_LIMIT, f"README.md is {size:,} bytes; move detail to docs/ (limit {README_LIMIT:,})"


def _worklog_files():
    for entry in WORKLOG_SCOPE:
        path = ROOT / entry
        if path.is_file():
            yield path
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d not in WORKLOG_SKIP_DIRS]
            if Path(folder) == ROOT / "tests":
                dirs[:] = [d for d in dirs if d != "data"]
            for name in files:
                yield Path(folder) / name


@pytest.mark.parametrize("scope", ["docs", "code"])
def test_no_work_period_ordinals_or_tracker_numbers(scope):
    doc_scope = scope == "docs"
    hits = []
    for path in _worklog_files():
        rel = path.relative_to(ROOT).as_posix()
        if (rel.endswith(".md")) != doc_scope:
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue  # binaries: plots, jars
        hits += [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(lines, 1) if WORKLOG.search(line)]
    assert not hits, "say what the thing is, not which work period or tracker entry it was:\n" + "\n".join(hits)
