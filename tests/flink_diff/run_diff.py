"""Differential run: generated cases on Apache Flink 2.3.0 and through streamjoin, with a summary per family.

    .venv/bin/python -m tests.flink_diff.run_diff --n 1000 --seed 7 [--chains 50] [--windows 50]
    [--work .local/flink-diff/run] [--reuse-flink]
    make flink-diff N=1000 SEED=7 [CHAINS=50] [WINDOWS=50] [REUSE_FLINK=1]

Generates ``n`` cases (:mod:`generate`) and ``chains`` chains of operators (``generate.generate_chain_cases``,
families ``chain_*``; by default ``n // 20``, at least one per family) and ``windows`` window aggregates and as
many window Top-N, window joins, session window aggregates, window aggregates with grouping sets and chains of
event-time operators (``generate.generate_window_cases``, families
``window_*``; by default ``n // 20``) and Top-N over changelogs (``generate.generate_rank_cases``, families
``topn_*``), runs them on Flink with the Flink venv's
python (:mod:`run_flink`, one JVM for all cases), replays them through streamjoin
(``streamjoin.testing.replay.replay_cases``, one Spark session) at 1 and at 7 rows per micro-batch (the chains
also at 100), and prints, per family, how many cases are equal to Flink (final rows at every batch size and the
changelog at one row per batch — for joins and event-time operators up to the order within runs of one RowKind,
``generate.ORDER_WITHIN_RUNS_FAMILIES`` —, and for a chain with an upsert key each key's changes at 7 and 100,
``compare.per_key_difference``), differ as ``tests/data/flink-diff/known_differences.json`` lists
them (``documented``), differ only in the changelog, differ in the final rows, are refused by streamjoin, or
are refused by Flink. A listing applies to a generated case only when the stored regression case of that
name is the same case (tables, arrival, query, setup). Every case, output and difference stays under
``--work`` (``summary.json``). Exits 1 when any case fails (:func:`classify`).

A case that fails is run on Flink once more, alone and at :data:`RERUN_PACE_MS` per row, before it counts: the
Flink runner keeps the case's arrival order across two inputs by pacing its sources in wall-clock time, which a
loaded machine can outrun (a row of one input overtaking the row of the other input emitted before it). When
Flink's second output differs from its first, the first did not follow the case's arrival order, and the case
is judged against the second (:func:`reference`); the summary says so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

from .compare import difference, per_key_difference
from .generate import (
    CHAIN_FAMILIES,
    ORDER_WITHIN_RUNS_FAMILIES,
    PER_KEY_FAMILIES,
    WINDOW_FAMILIES,
    family_of,
    generate_cases,
    generate_chain_cases,
    generate_rank_cases,
    generate_window_cases,
)

ROOT = Path(__file__).resolve().parents[2]
FLINK_PYTHON = ROOT / ".local" / "flink-venv" / "bin" / "python"
DIFF_DIR = ROOT / "tests" / "data" / "flink-diff"
CASES_PER_FLINK_JVM = 200
#: Flink's pacing (ms after each row) when a failing case is run again: ten times ``run_flink.py``'s default.
RERUN_PACE_MS = 300
#: The summary's columns: :func:`outcome`'s kinds, with ``documented`` for a difference listed as it is.
OUTCOMES = ["equal", "documented", "changelog", "final", "refused", "flink-refused"]
_UNDOCUMENTED = {"changelog", "final", "refused"}
_CASE_PARTS = ("tables", "arrival", "query", "setup")


def run_flink(case_paths: list[Path], out_dir: Path, work: Path, *, pace_ms: int | None = None) -> None:
    """Run the cases on Flink (subprocesses in the Flink venv); writes ``out_dir/NAME.json``.

    ``pace_ms``: the sources' wait after each row (``run_flink.py --pace-ms``; its default when None).

    One Flink JVM runs at most :data:`CASES_PER_FLINK_JVM` cases: every job compiles its own generated
    classes, which a JVM keeps, and ~500 jobs fill its compressed class space (``OutOfMemoryError``).

    Raises:
        subprocess.CalledProcessError: when the runner itself fails (a case Flink refuses is an error document).
    """
    for start in range(0, len(case_paths), CASES_PER_FLINK_JVM):
        chunk = case_paths[start : start + CASES_PER_FLINK_JVM]
        subprocess.run(
            [
                str(FLINK_PYTHON),
                str(ROOT / "tests" / "flink_diff" / "run_flink.py"),
                *map(str, chunk),
                "--out-dir",
                str(out_dir),
                "--work",
                str(work),
                *(["--pace-ms", str(pace_ms)] if pace_ms is not None else []),
            ],
            check=True,
        )


def reusable(case_path: Path, text: str, flink_output: Path) -> bool:
    """Whether ``flink_output`` is Flink's output of the case ``text`` (``--reuse-flink``): the case file at
    ``case_path`` holds ``text`` already and the output was written after it. A generated case is a pure
    function of ``--n``/``--seed`` and the generator, so a rerun of the same seed only needs streamjoin's side;
    a changed case, or one whose output is missing, runs on Flink again."""
    return (
        flink_output.exists()
        and case_path.exists()
        and case_path.read_text() == text
        and flink_output.stat().st_mtime >= case_path.stat().st_mtime
    )


def outcome(
    flink: dict,
    ours_1: dict,
    ours_7: dict,
    *,
    within_runs: bool = False,
    upsert_key: list[str] | None = None,
    more: dict[int, dict] | None = None,
    per_key_at_one: bool = False,
) -> tuple[str, str | None]:
    """How streamjoin's results (at 1 and 7 rows per micro-batch) compare with Flink's: ``(outcome, detail)``.

    ``outcome`` is one of :data:`OUTCOMES`; ``detail`` is the first difference found (``None`` when equal).
    ``within_runs``: compare the changelog up to the order within runs of one RowKind (``compare.in_runs``).
    ``more``: results at other batch sizes (rows per micro-batch → result), whose final rows count too.
    ``upsert_key``: the output's upsert key (a chain case's ``upsert_key``); then each key's changes at 7 rows and
    at the sizes of ``more`` are compared too (``compare.per_key_difference``; a difference is ``changelog``).
    ``per_key_at_one``: with an ``upsert_key``, compare the changelog at one row per micro-batch key by key too, not
    as a whole (``generate.PER_KEY_FAMILIES``: Flink's own order across keys changes from run to run).
    """
    if flink.get("error"):
        return "flink-refused", flink["error"]
    batched = {7: ours_7, **(more or {})}
    for ours in (ours_1, *batched.values()):
        if ours.get("error"):
            return "refused", ours["error"]
    for ours in (ours_1, *batched.values()):
        found = difference(flink, ours, changelog=False)
        if found:
            return "final", found
    per_key_at_one = per_key_at_one and upsert_key is not None
    found = None if per_key_at_one else difference(flink, ours_1, within_runs=within_runs)
    if found:
        return "changelog", found
    if upsert_key is not None:
        for rows, ours in sorted({**batched, **({1: ours_1} if per_key_at_one else {})}.items()):
            found = per_key_difference(flink, ours, upsert_key, within_runs=within_runs)
            if found:
                return "changelog", f"at {rows} row{'s' if rows > 1 else ''} per micro-batch: {found}"
    return "equal", None


def listed(known: dict[str, dict], generated: dict[str, dict], stored: dict[str, dict]) -> dict[str, dict]:
    """The entries of ``known`` (``known_differences.json``: name → ``{"differs_in", "reason"}``) that apply.

    Args:
        generated: name → case document of this run.
        stored: name → the stored case document of that name (``tests/data/flink-diff/cases``), where one exists.

    Returns:
        The entries whose case was generated here and is the stored case of that name (same tables, arrival,
        query and setup): a listing describes that case, not another one that happens to share its name.
    """
    return {
        name: entry
        for name, entry in known.items()
        if name in generated
        and name in stored
        and all(generated[name].get(k) == stored[name].get(k) for k in _CASE_PARTS)
    }


def classify(kind: str, entry: dict | None) -> tuple[str, bool]:
    """The summary column of a case whose :func:`outcome` is ``kind``, and whether the case fails the run.

    An unlisted case (``entry`` None) fails when it differs (``changelog``, ``final``, ``refused``); a case
    Flink refuses is reported, not failed. A listed case counts as ``documented`` when it differs as
    ``entry["differs_in"]`` says, and fails otherwise: when it differs in another way, and when it is now
    equal to Flink (a fixed difference leaves the list, as ``tests/test_flink_diff.py`` requires).
    """
    if entry is None:
        return kind, kind in _UNDOCUMENTED
    if kind == entry["differs_in"]:
        return "documented", False
    return kind, True


def reference(first: dict, again: dict) -> tuple[dict, bool]:
    """Flink's output to judge a failing case by, from its first run and its slower rerun (``RERUN_PACE_MS``).

    Returns ``(output, changed)``: the rerun's output and True when the two runs' changelogs (or errors)
    differ — Flink's own result depended on the pacing, and the slower run is the one that kept the arrival
    order — else the first output and False (the difference stands as found).
    """

    def produced(output: dict):
        return output.get("error") or output.get("changelog")

    if produced(first) != produced(again):
        return again, True
    return first, False


def summary_table(table: dict[str, Counter]) -> str:
    """The per-family table of outcome counts (:data:`OUTCOMES` columns) with a total line."""
    width = max([18, *(len(f) + 1 for f in table)])
    lines = [f"{'family':{width}}" + "".join(f"{o:>14}" for o in OUTCOMES)]
    for family in sorted(table):
        lines.append(f"{family:{width}}" + "".join(f"{table[family][o]:>14}" for o in OUTCOMES))
    total = sum(table.values(), Counter())
    lines.append(f"{'total':{width}}" + "".join(f"{total[o]:>14}" for o in OUTCOMES))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--chains",
        type=int,
        default=None,
        help="chains of operators to generate too (default: n // 20, at least one per chain family)",
    )
    parser.add_argument(
        "--windows",
        type=int,
        default=None,
        help="window aggregates and as many window Top-N, window joins and Top-N to generate too (default: n // 20, "
        "at least one per family)",
    )
    parser.add_argument("--work", type=Path, default=ROOT / ".local" / "flink-diff" / "run")
    parser.add_argument(
        "--reuse-flink",
        action="store_true",
        help="keep the Flink output under --work of every case whose case file is unchanged",
    )
    args = parser.parse_args(argv)
    cases_dir, flink_dir = args.work / "cases", args.work / "flink"
    cases_dir.mkdir(parents=True, exist_ok=True)
    chains = max(len(CHAIN_FAMILIES), args.n // 20) if args.chains is None else args.chains
    paths, generated, to_run = [], {}, []
    windows = max(len(WINDOW_FAMILIES), args.n // 20) if args.windows is None else args.windows
    generated_cases = [
        *generate_cases(args.n, args.seed),
        *generate_chain_cases(chains, args.seed),
        *generate_window_cases(windows, args.seed),
        *generate_window_cases(windows, args.seed, kind="ranks"),
        *generate_window_cases(windows, args.seed, kind="joins"),
        *generate_window_cases(windows, args.seed, kind="sessions"),
        *generate_window_cases(windows, args.seed, kind="grouping"),
        *generate_window_cases(windows, args.seed, kind="chains"),
        *generate_rank_cases(windows, args.seed),
    ]
    for case in generated_cases:
        path = cases_dir / f"{case['name']}.json"
        text = json.dumps(case, indent=1) + "\n"
        if not (args.reuse_flink and reusable(path, text, flink_dir / path.name)):
            path.write_text(text)
            to_run.append(path)
        paths.append(path)
        generated[case["name"]] = json.loads(text)  # as stored: lists, not tuples
    known = json.loads((DIFF_DIR / "known_differences.json").read_text())
    stored = {
        n: json.loads((DIFF_DIR / "cases" / f"{n}.json").read_text())
        for n in known
        if (DIFF_DIR / "cases" / f"{n}.json").exists()
    }
    applicable = listed(known, generated, stored)
    print(f"Flink: {len(to_run)} cases to run, {len(paths) - len(to_run)} outputs reused", flush=True)
    run_flink(to_run, flink_dir, args.work.parent)

    from streamjoin.session import spark_session
    from streamjoin.testing.replay import replay_cases

    spark = spark_session("streamjoin-flink-diff")
    ours = {
        rows: replay_cases(spark, paths, args.work / f"streamjoin-{rows}", micro_batch_rows=rows) for rows in (1, 7)
    }
    chain_paths = [path for path in paths if family_of(path.stem) in CHAIN_FAMILIES]
    ours[100] = replay_cases(spark, chain_paths, args.work / "streamjoin-100", micro_batch_rows=100)

    def judge(name: str, flink: dict) -> tuple[str, bool, str | None]:
        chain = family_of(name) in CHAIN_FAMILIES
        kind, detail = outcome(
            flink,
            ours[1][name],
            ours[7][name],
            within_runs=family_of(name) in ORDER_WITHIN_RUNS_FAMILIES,
            upsert_key=generated[name].get("upsert_key"),
            more={100: ours[100][name]} if chain else None,
            per_key_at_one=family_of(name) in PER_KEY_FAMILIES,
        )
        return *classify(kind, applicable.get(name)), detail

    firsts = {path.stem: json.loads((flink_dir / path.name).read_text()) for path in paths}
    judged = {name: judge(name, flink) for name, flink in firsts.items()}
    suspects = [name for name, (column, fails, _) in judged.items() if fails and not firsts[name].get("error")]
    rerun = {}
    if suspects:
        print(f"Flink again at {RERUN_PACE_MS} ms per row: {len(suspects)} failing cases", flush=True)
        run_flink(
            [cases_dir / f"{name}.json" for name in suspects],
            args.work / "flink-rerun",
            args.work.parent,
            pace_ms=RERUN_PACE_MS,
        )
        for name in suspects:
            flink, changed = reference(
                firsts[name], json.loads((args.work / "flink-rerun" / f"{name}.json").read_text())
            )
            rerun[name] = "changed: judged by the rerun" if changed else "same as the first run"
            judged[name] = judge(name, flink)
    table: dict[str, Counter] = defaultdict(Counter)
    details, failed = {}, []
    for path in paths:
        name = path.stem
        column, fails, detail = judged[name]
        table[family_of(name)][column] += 1
        if fails:
            failed.append(name)
        if detail or name in applicable or name in rerun:
            details[name] = {
                "outcome": column,
                "detail": detail,
                "fails": fails,
                **({"listed_as": applicable[name]["differs_in"]} if name in applicable else {}),
                **({"flink_rerun": rerun[name]} if name in rerun else {}),
            }
    (args.work / "summary.json").write_text(json.dumps(details, indent=1) + "\n")
    print("\n" + summary_table(table))
    for name, note in rerun.items():
        print(f"rerun on Flink {name}: {note}")
    for name in failed:
        entry = details[name]
        listed_as = f" (listed as {entry['listed_as']})" if "listed_as" in entry else ""
        detail = entry["detail"] or "equal to Flink: remove it from known_differences.json"
        print(f"FAIL {name}: {entry['outcome']}{listed_as}: {detail}")
    print(f"\ndifferences: {args.work / 'summary.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
