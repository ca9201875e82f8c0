"""The typed contract between the Python planner and the jvm engine (streamjoin/contract.py).

A spec field renamed, added or dropped on one side only fails here: the Scala twin is generated from the
Python specs and must be current, every field must be read by the Scala class that takes the spec, and every
value is checked against its field's type when encoded.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing

import pytest
from pyspark.sql.types import IntegerType, StructField, StructType

from streamjoin import contract
from streamjoin.config import PROJECT_ROOT
from streamjoin.contract import (
    SCALA_FILE,
    SPECS,
    ChangelogNormalizeSpec,
    IntervalJoinSpec,
    Position,
    TwoInputSpec,
    camel,
    encode,
    scala_source,
)

SCALA_SOURCES = SCALA_FILE.parents[1]  # jvm/operators/src/main/scala/streamjoin


def _hand_written_scala() -> dict[str, str]:
    return {str(p): p.read_text() for p in SCALA_SOURCES.rglob("*.scala") if p != SCALA_FILE}


def test_the_scala_twin_is_generated_from_the_python_specs():
    assert SCALA_FILE.read_text() == scala_source(), "OperatorSpecs.scala is stale: run `make operator-specs`"


def test_a_field_renamed_on_the_python_side_changes_the_scala_twin(monkeypatch):
    renamed = dataclasses.make_dataclass(
        "ChangelogNormalizeSpec", [("columns", tuple[str, ...]), ("emit_update_before", bool), ("state_ttl", bool)]
    )
    monkeypatch.setattr(contract, "SPECS", (renamed,))
    assert "emitUpdateBefore: Boolean" in scala_source()
    assert scala_source() not in SCALA_FILE.read_text()


@pytest.mark.parametrize("spec_type", SPECS, ids=lambda t: t.__name__)
def test_every_field_is_read_by_the_scala_class_that_takes_the_spec(spec_type):
    """The Scala classes taking ``spec_type`` (a parameter or a member of that type) read each of its fields."""
    name = spec_type.__name__
    takes = re.compile(rf":\s*(Seq\[)?{name}\b")
    readers = {path: text for path, text in _hand_written_scala().items() if takes.search(text)}
    assert readers, f"no Scala class takes a {name}"
    text = "\n".join(readers.values())
    unread = [f.name for f in dataclasses.fields(spec_type) if not re.search(rf"\.{camel(f.name)}\b", text)]
    assert not unread, f"{name}: fields {unread} are read by none of {sorted(readers)}"


@pytest.mark.parametrize("spec_type", SPECS, ids=lambda t: t.__name__)
def test_every_field_is_written_by_the_python_side(spec_type):
    """No field has a default, so every construction of a spec gives every field (mypy checks the names)."""
    defaulted = [
        f.name
        for f in dataclasses.fields(spec_type)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]
    assert not defaulted, f"{spec_type.__name__}: fields with defaults {defaulted}"
    assert spec_type.__dataclass_params__.frozen


def test_encode_writes_camel_case_keys_and_nested_specs():
    inputs = TwoInputSpec(key_columns=("_key0",), rowtime=(Position(1), Position(2)), row_watermark=None)
    spec = IntervalJoinSpec(inputs=inputs, how="left", lower_ms=-5, upper_ms=10, candidates=False, condition="a <> b")
    assert json.loads(encode(spec)) == {
        "inputs": {"keyColumns": ["_key0"], "rowtime": [1, 2], "rowWatermark": None},
        "how": "left",
        "lowerMs": -5,
        "upperMs": 10,
        "candidates": False,
        "condition": "a <> b",
    }
    decoder = contract.ChangeDecoderSpec(
        format="json",
        rowkind_field=None,
        columns=StructType([StructField("k", IntegerType())]),
        primary_key=("k",),
        time_zone="UTC",
        upsert=False,
        key_fields=(),
        except_key=False,
    )
    assert json.loads(encode(decoder))["columns"]["fields"][0]["name"] == "k"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ChangelogNormalizeSpec(columns=("k",), update_before=1, state_ttl=False), "update_before: expected bool"),
        (ChangelogNormalizeSpec(columns="k", update_before=True, state_ttl=False), "columns: expected a sequence"),
        (ChangelogNormalizeSpec(columns=(1,), update_before=True, state_ttl=False), r"columns\[0\]: expected str"),
        (contract.ResidualPaddingSpec(columns=(), outer=(True,)), "outer: expected 2 values"),
        (
            contract.TemporalJoinSpec(inputs=None, how="inner", append_only_versions=False),
            "inputs: expected a TwoInputSpec",
        ),
        (contract.DeduplicateSpec("any", False, (), None, (), False), "keep: 'any' is not one of"),
    ],
)
def test_encode_refuses_a_value_of_another_type_naming_the_field(spec, message):
    with pytest.raises(TypeError, match=message):
        encode(spec)


def test_the_literals_are_the_runtime_s_names():
    from streamjoin.runtime.aggregates import FUNCTIONS
    from streamjoin.runtime.over_aggregate import functions as over_functions
    from streamjoin.runtime.regular_join.state_views import StateLayout
    from streamjoin.runtime.regular_join.streaming_join import JoinType

    assert typing.get_args(contract.AggregateFunctionName) == FUNCTIONS
    assert set(typing.get_args(contract.JoinTypeName)) == {t.value for t in JoinType}
    assert set(typing.get_args(contract.StateLayoutName)) == {layout.value for layout in StateLayout}
    functions = {
        name
        for name, value in vars(over_functions).items()
        if isinstance(value, type) and issubclass(value, over_functions.OverFunction) and not name.startswith("_")
    }
    assert set(typing.get_args(contract.OverFunctionName)) == functions - {"OverFunction"}


def test_the_shared_constants_are_the_ones_the_python_engine_uses():
    from streamjoin.changelog import ROWKIND_COLUMN, SEQ_COLUMN, RowKind
    from streamjoin.runtime import processor, two_input

    assert contract.CONSTANTS["RowKindColumn"] == ROWKIND_COLUMN and contract.CONSTANTS["SeqColumn"] == SEQ_COLUMN
    assert {contract.CONSTANTS[k] for k in ("Insert", "UpdateBefore", "UpdateAfter", "Delete")} == {
        k.value for k in RowKind
    }
    assert processor.LATE_STATE is contract.LATE_STATE and two_input.SIDE_COLUMN is contract.SIDE_COLUMN
    assert typing.get_args(processor.Clock) == contract.CLOCKS
    scala = "\n".join(_hand_written_scala().values())
    for value in ('"numLateRecordsDropped"', '"_side"', '"_left"', '"_right"', '"_pair"', '"_rowkind"', '"_seq"'):
        assert value not in scala, f"Scala spells {value} itself instead of reading Contract"


def test_every_jvm_logic_names_a_scala_class_of_its_family_folder():
    """``JvmLogic("<family>.<Class>", …)``: the class is in ``operators/<family>/``, as its Python twin is in
    ``streamjoin/runtime/<family>/``."""
    named = set()
    for path in (PROJECT_ROOT / "streamjoin" / "runtime").rglob("*.py"):
        named |= set(re.findall(r'"([a-z_]+)\.([A-Z]\w*Logic)"', path.read_text()))
    assert len(named) >= 11
    for family, name in sorted(named):
        assert (PROJECT_ROOT / "streamjoin" / "runtime" / family).is_dir(), f"no Python family {family}"
        folder = SCALA_FILE.parent / family
        assert any(re.search(rf"\bclass {name}\(", p.read_text()) for p in folder.glob("*.scala")), (
            f"{family}.{name}: no such class in {folder}"
        )
