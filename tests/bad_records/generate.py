"""Seeded generator of the bad-input corpus: good and bad Kafka records interleaved, each with what it must become.

Writes ``tests/data/bad_records/corpus.jsonl`` (the README beside it describes the format). Run from the
repository root: ``.venv/bin/python tests/bad_records/generate.py`` (same seed, same file).

Three topics, one per format: ``bad_json`` (``json`` with ``json.rowkind-field`` = ``op``), ``bad_debezium``
(``debezium-json``) and ``bad_upsert`` (``upsert-kafka``, ``json`` key and value), all with the columns of
:data:`COLUMNS` and primary key ``id``. The expectations follow docs/semantics.md §7.5 and Flink 2.3.0's
``JsonParserToRowDataConverters`` (checked against flink-json 2.3.0 for the lenient values).
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

SEED = 17
OUT = Path(__file__).resolve().parents[1] / "data" / "bad_records" / "corpus.jsonl"
#: Columns of every topic's table, in order; ``id`` is the primary key.
COLUMNS = ("id", "name", "amount", "qty", "ts", "flag")
#: Replaced by ``"x" * pad`` when a line has ``pad``: a large but valid record without a large corpus file.
PAD = "<PAD>"
#: Size of a large record's ``name`` (bytes): within the broker's 1 MB ``message.max.bytes``.
LARGE = 900_000
RECORDS = {"bad_json": 420, "bad_debezium": 420, "bad_upsert": 300}


class Topic:
    """One topic's history: the rows the upsert sink holds so far, and the lines written."""

    def __init__(self, name: str, rng: random.Random):
        self.name, self.rng, self.table, self.lines, self.next_id = name, rng, {}, [], 1

    def row(self, key: int) -> dict:
        r = self.rng
        return {
            "id": key,
            "name": f"n{key}-{r.randrange(10**6)}",
            "amount": f"{r.randrange(10**7) / 100:.2f}",
            "qty": r.randrange(-1000, 1000),
            "ts": (
                f"2024-0{r.randint(1, 9)}-1{r.randint(0, 9)} "
                f"1{r.randint(0, 9)}:0{r.randint(0, 9)}:00.{r.randrange(1000):03d}"
            ),
            "flag": r.random() < 0.5,
        }

    def fresh(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def seen(self) -> int | None:
        return self.rng.choice(sorted(self.table)) if self.table else None

    def emit(self, kind: str, value, expect: dict, *, key=None, pad: int | None = None) -> None:
        line = {"topic": self.name, "kind": kind}
        for field, data in (("key", key), ("value", value)):
            if isinstance(data, bytes):
                line[f"{field}_b64"] = base64.b64encode(data).decode()
            else:
                line[field] = data if data is None or isinstance(data, str) else json.dumps(data)
        if pad:
            line["pad"] = pad
        line["expect"] = expect
        self.lines.append(line)

    def apply(self, changes: list[tuple[str, dict]]) -> dict:
        """The upsert sink's view (DropUpdateBefore before it): +I/+U put, -D removes, -U nothing."""
        for kind, row in changes:
            if kind in ("+I", "+U"):
                self.table[row["id"]] = row
            elif kind == "-D":
                self.table.pop(row["id"], None)
        return {"changes": [[k, r] for k, r in changes]}


def _bad_values(t: Topic) -> list[tuple[str, object, str]]:
    """(kind, a row's bad value, reason) of the value-level problems every format shares."""
    k = t.fresh()
    r = t.row(k)
    choices = [
        ("wrong-type", r | {"qty": "many"}, 'column qty: value "many" is not INT'),
        ("wrong-type", r | {"qty": True}, "column qty: value true is not INT"),
        ("wrong-type", r | {"amount": "abc"}, 'column amount: value "abc" is not DECIMAL(10,2)'),
        ("wrong-type", r | {"ts": 1700000000}, "column ts: value 1700000000 is not TIMESTAMP"),
        ("wrong-type", r | {"ts": "yesterday"}, 'column ts: value "yesterday" is not TIMESTAMP'),
        ("int-overflow", r | {"qty": 2147483648}, "column qty: value 2147483648 is not INT"),
        ("int-overflow", r | {"qty": -2147483649}, "column qty: value -2147483649 is not INT"),
        ("decimal-precision", r | {"amount": 123456789.5}, "column amount: value 123456789.5 is not DECIMAL(10,2)"),
        (
            "timestamp-range",
            r | {"ts": "10000-01-01 00:00:00"},
            'column ts: value "10000-01-01 00:00:00" is not TIMESTAMP',
        ),
        (
            "timestamp-range",
            r | {"ts": "2024-13-01 00:00:00"},
            'column ts: value "2024-13-01 00:00:00" is not TIMESTAMP',
        ),
        ("null-primary-key", r | {"id": None}, "primary key column id is null"),
        ("missing-primary-key", {c: v for c, v in r.items() if c != "id"}, "primary key column id is null"),
    ]
    return choices


def _lenient(t: Topic, key: int) -> tuple[dict, dict]:
    """A record value Flink's converters accept although it is not of the column's JSON kind, and the row it gives."""
    row = t.row(key)
    record, value = t.rng.choice(
        [
            ({"qty": "12"}, {"qty": 12}),  # Integer.parseInt of the text
            ({"qty": 3.7}, {"qty": 3}),  # Jackson's asInt truncates
            ({"flag": "yes"}, {"flag": False}),  # Boolean.parseBoolean
            ({"flag": 1}, {"flag": False}),
            ({"flag": "TRUE"}, {"flag": True}),
            ({"name": 12}, {"name": "12"}),  # a non-text node's JSON text
            ({"amount": 1.005}, {"amount": "1.01"}),  # rounded HALF_UP to the scale
        ]
    )
    return row | record, row | value


def _invalid_utf8(row: dict) -> bytes:
    return json.dumps(row | {"name": "@"}).encode().replace(b"@", b"\xff\xfe")


def _common_bad(t: Topic, wrap) -> None:
    """One bad record shared by every format; ``wrap(row)`` makes a record value of a row."""
    kind = t.rng.choice(["value", "value", "value", "malformed", "not-object", "utf8"])
    if kind == "value":
        values = _bad_values(t)
        kind = t.rng.choice(sorted({k for k, _, _ in values}))  # each kind as often, whatever its number of values
        name, row, reason = t.rng.choice([v for v in values if v[0] == kind])
        t.emit(name, wrap(row), {"dead": reason}, key=_key(t, row.get("id")))
    elif kind == "malformed":
        text = json.dumps(wrap(t.row(t.fresh())))
        bad = t.rng.choice([text[: len(text) // 2], text.replace('"', "'"), "{" + text, text.replace(":", "=", 1)])
        t.emit("malformed-json", bad, {"dead": "malformed JSON"}, key=_key(t, t.fresh()))
    elif kind == "not-object":
        t.emit(
            "not-a-json-object",
            t.rng.choice(["null", "42", '"text"', "[1, 2]", "true"]),
            {"dead": "not a JSON object"},
            key=_key(t, t.fresh()),
        )
    else:
        t.emit("invalid-utf8", _invalid_utf8(wrap(t.row(t.fresh()))), {"dead": "invalid UTF-8"}, key=_key(t, t.fresh()))


def _key(t: Topic, key) -> str | None:
    """An upsert record's key (a JSON object of the primary key); other topics key by ``id`` as a text."""
    if t.name == "bad_upsert":
        return json.dumps({"id": key})
    return None if key is None else str(key)


def _json_good(t: Topic) -> None:
    r, old = t.rng.random(), t.seen()
    if r < 0.35 or old is None:
        row = t.row(t.fresh())
        t.emit("insert", row | t.rng.choice([{}, {"op": "+I"}]), t.apply([("+I", row)]), key=str(row["id"]))
    elif r < 0.55:
        row = t.row(old)
        t.emit("update", row | {"op": "+U"}, t.apply([("+U", row)]), key=str(old))
    elif r < 0.65:
        row = t.table[old]
        t.emit("delete", row | {"op": "-D"}, t.apply([("-D", row)]), key=str(old))
    elif r < 0.72:
        row, value = _lenient(t, t.fresh())
        t.emit("lenient-value", row, t.apply([("+I", value)]), key=str(row["id"]))
    elif r < 0.80:
        # -U with no +U after it: the upsert sink's DropUpdateBefore drops it, the row stays.
        t.emit("update-before-alone", t.table[old] | {"op": "-U"}, t.apply([("-U", t.table[old])]), key=str(old))
    elif r < 0.88:
        row = t.row(t.fresh())  # a delete of a key never seen: the sink deletes nothing
        t.emit("delete-unseen-key", row | {"op": "-D"}, t.apply([("-D", row)]), key=str(row["id"]))
    elif r < 0.985:
        row = t.row(t.fresh())  # an update of a key never seen: the upsert inserts it
        t.emit("update-unseen-key", row | {"op": "+U"}, t.apply([("+U", row)]), key=str(row["id"]))
    else:
        row = t.row(t.fresh()) | {"name": PAD}
        t.emit("large-record", row, t.apply([("+I", row)]), key=str(row["id"]), pad=LARGE)


def _json_bad(t: Topic) -> None:
    if t.rng.random() < 0.25:
        op = t.rng.choice(["X", "+X", "insert", "I", ""])
        t.emit("unknown-rowkind", t.row(t.fresh()) | {"op": op}, {"dead": f"unknown RowKind {op} in field op"})
    else:
        _common_bad(t, lambda row: row)


def _dbz(before, after, op) -> dict:
    return {
        "before": before,
        "after": after,
        "op": op,
        "source": {"db": "shop", "table": "orders"},
        "ts_ms": 1700000000000,
    }


def _debezium_good(t: Topic) -> None:
    r, old = t.rng.random(), t.seen()
    if r < 0.35 or old is None:
        row = t.row(t.fresh())
        op = t.rng.choice(["c", "r"])
        t.emit("insert", _dbz(None, row, op), t.apply([("+I", row)]), key=str(row["id"]))
    elif r < 0.6:
        row = t.row(old)
        t.emit("update", _dbz(t.table[old], row, "u"), t.apply([("-U", t.table[old]), ("+U", row)]), key=str(old))
    elif r < 0.72:
        row = t.table[old]
        t.emit("delete", _dbz(row, None, "d"), t.apply([("-D", row)]), key=str(old))
    elif r < 0.8:
        row, value = _lenient(t, t.fresh())
        t.emit("lenient-value", _dbz(None, row, "c"), t.apply([("+I", value)]), key=str(row["id"]))
    elif r < 0.88:
        row = t.row(t.fresh())
        t.emit("delete-unseen-key", _dbz(row, None, "d"), t.apply([("-D", row)]), key=str(row["id"]))
    elif r < 0.985:
        before = t.row(t.fresh())
        after = t.row(before["id"])
        t.emit(
            "update-unseen-key",
            _dbz(before, after, "u"),
            t.apply([("-U", before), ("+U", after)]),
            key=str(after["id"]),
        )
    else:
        row = t.row(t.fresh()) | {"name": PAD}
        t.emit("large-record", _dbz(None, row, "c"), t.apply([("+I", row)]), key=str(row["id"]), pad=LARGE)


def _debezium_bad(t: Topic) -> None:
    r, row = t.rng.random(), t.row(t.fresh())
    if r < 0.15:
        op = t.rng.choice(["t", "m", "x", "U"])  # t: Debezium's truncate event, m: a message; Flink fails on both
        t.emit("unknown-debezium-op", _dbz(None, row, op), {"dead": f"unknown Debezium op {op}"})
    elif r < 0.2:
        t.emit("unknown-debezium-op", {"before": None, "after": row}, {"dead": "unknown Debezium op null"})
    elif r < 0.3:
        # -U with no +U: an update event without its after-image.
        t.emit("update-without-after", _dbz(row, None, "u"), {"dead": "field after is missing"})
    elif r < 0.35:
        t.emit("delete-without-before", _dbz(None, None, "d"), {"dead": "field before is missing"})
    else:
        _common_bad(t, lambda row: _dbz(None, row, "c"))


def _upsert_good(t: Topic) -> None:
    r, old = t.rng.random(), t.seen()
    if r < 0.45 or old is None:
        row = t.row(t.fresh() if r < 0.3 or old is None else old)
        t.emit("upsert", row, t.apply([("+I", row)]), key=_key(t, row["id"]))
    elif r < 0.65:
        # a tombstone: -D of its key, the other columns null
        t.emit("tombstone", None, t.apply([("-D", {c: None for c in COLUMNS} | {"id": old})]), key=_key(t, old))
    elif r < 0.75:
        row, value = _lenient(t, t.fresh())
        t.emit("lenient-value", row, t.apply([("+I", value)]), key=_key(t, row["id"]))
    elif r < 0.985:
        key = t.fresh()
        t.emit(
            "tombstone-unseen-key", None, t.apply([("-D", {c: None for c in COLUMNS} | {"id": key})]), key=_key(t, key)
        )
    else:
        row = t.row(t.fresh()) | {"name": PAD}
        t.emit("large-record", row, t.apply([("+I", row)]), key=_key(t, row["id"]), pad=LARGE)


def _upsert_bad(t: Topic) -> None:
    r, row = t.rng.random(), t.row(t.fresh())
    key = json.dumps({"id": row["id"]})
    choices = [
        ("null-key", None, "null key"),
        ("empty-key", "", "empty key"),
        ("malformed-key", '{"id": ', "malformed JSON key"),
        ("key-not-object", str(row["id"]), "key is not a JSON object"),
        ("key-wrong-type", json.dumps({"id": "x"}), 'key: column id: value "x" is not INT'),
        ("key-int-overflow", json.dumps({"id": 2**31}), f"key: column id: value {2**31} is not INT"),
        ("invalid-utf8-key", b'{"id": "\xff"}', "invalid UTF-8 in key"),
    ]
    if r < 0.4:
        kind, bad, reason = t.rng.choice(choices)
        t.emit(kind, row, {"dead": reason}, key=bad)
    else:
        _common_bad(t, lambda row: row)
    if t.lines[-1]["expect"]["dead"] == "primary key column id is null":
        t.lines[-1]["key"] = key  # the key holds the id; the value's null id wins (value.fields-include ALL)


GENERATORS = {
    "bad_json": (_json_good, _json_bad),
    "bad_debezium": (_debezium_good, _debezium_bad),
    "bad_upsert": (_upsert_good, _upsert_bad),
}


def generate(seed: int = SEED) -> list[dict]:
    """The corpus lines: per topic, good and bad records interleaved at random, plus tombstones and empty values."""
    lines = []
    for topic, count in RECORDS.items():
        t = Topic(topic, random.Random(f"{seed}/{topic}"))
        good, bad = GENERATORS[topic]
        while len(t.lines) < count:
            r = t.rng.random()
            if r < 0.5:
                good(t)
            elif r < 0.93:
                bad(t)
            elif r < 0.97 and topic != "bad_upsert":
                # Flink's json and debezium-json schemas return no row for a tombstone ("skip tombstone messages")
                t.emit("tombstone", None, {"skip": "a null value (tombstone)"}, key=_key(t, t.seen()))
            else:
                t.emit("empty-value", "", {"skip": "an empty value"}, key=_key(t, t.seen() or 1))
        lines += t.lines
    return lines


def main() -> None:
    lines = generate()
    OUT.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
    print(f"{len(lines)} records → {OUT}")


if __name__ == "__main__":
    main()
