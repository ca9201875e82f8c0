"""Changelog assertions: the invariant every operator's output keeps, checked at each key visit when turned on.

docs/semantics.md §1.1 states it: within a micro-batch each operator emits, per upsert key, a changelog that
is valid on its own and in ``_seq`` order. What one visit of a key (the shell's ``handleInputRows`` or
``handleExpiredTimer``) can check of it:

* every operator: its changes' ``_seq`` paths rise strictly in the order it emitted them, so that ordering
  a micro-batch's output by ``_seq`` (what the next operator and the sink do) keeps the operator's order;
* an operator whose output's upsert key is its grouping key (group aggregate, deduplication, changelog
  normalize, upsert materializer: :attr:`~streamjoin.runtime.processor.KeyedLogic.output_keyed_by_key`):
  the visit's changes are one upsert key's changelog, so a ``-U`` is followed by its ``+U``, a retraction
  (``-U``/``-D``) follows an addition or starts the visit, retracts the row last added when the visit added
  one, and no ``+I`` follows an addition that was not retracted.

Off by default (one pass over each visit's changes); the tests turn it on for their Spark session with
``spark.conf.set(ASSERTIONS_CONF, "true")``. The jvm engine's twin is ``streamjoin.operators.ChangelogAssertions``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from pyspark.sql import SparkSession

from streamjoin import contract
from streamjoin.changelog import RowKind
from streamjoin.errors import ChangelogAssertionError

__all__ = ["ASSERTIONS_CONF", "assertions_on", "check_visit"]

#: The Spark setting that turns the assertions on (``"true"``) for the operators a query starts afterwards.
ASSERTIONS_CONF = contract.ASSERTIONS_CONF


def assertions_on(spark: SparkSession) -> bool:
    """Whether ``spark``'s :data:`ASSERTIONS_CONF` is ``"true"``."""
    return (spark.conf.get(ASSERTIONS_CONF, "false") or "false").lower() == "true"


def check_visit(
    operator: str, key: tuple, changes: Sequence[tuple[bytes, RowKind, tuple]], *, one_upsert_key: bool
) -> None:
    """Check one key visit's output against the invariant (module docstring).

    Args:
        operator: the logic's class name, for the message.
        key: the grouping key's values.
        changes: ``(_seq, RowKind, values)`` in emission order.
        one_upsert_key: whether the changes are one upsert key's changelog.

    Raises:
        ChangelogAssertionError: naming the operator, the key, the rule and the changes.
    """

    def fail(rule: str) -> None:
        shown = ", ".join(f"{kind.short}{list(values)} @{seq.hex()}" for seq, kind, values in changes)
        raise ChangelogAssertionError(f"{operator} for key {list(key)}: {rule}; the visit emitted {shown}")

    for (before, _, _), (after, kind, values) in pairwise(changes):
        if not before < after:
            fail(f"_seq {after.hex()} of {kind.short}{list(values)} does not rise after {before.hex()}")
    if not one_upsert_key:
        return
    added: tuple | None = None  # the row the visit last added and did not retract
    pending_update = False  # a -U waits for its +U
    for index, (_, kind, values) in enumerate(changes):
        if pending_update and kind is not RowKind.UPDATE_AFTER:
            fail(f"{kind.short}{list(values)} follows a -U, which its +U must follow")
        if kind.is_retract:
            if index and added is None:
                fail(f"{kind.short}{list(values)} retracts after a retraction")
            if added is not None and values != added:
                fail(f"{kind.short}{list(values)} retracts another row than the one added, {list(added)}")
            added, pending_update = None, kind is RowKind.UPDATE_BEFORE
        else:
            if kind is RowKind.INSERT and added is not None:
                fail(f"+I{list(values)} follows the addition of {list(added)}, not retracted")
            added, pending_update = values, False
    if pending_update:
        fail("the visit ends on a -U without its +U")
