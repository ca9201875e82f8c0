"""ChangelogNormalize (docs/semantics.md §1): the logic (:mod:`.logic`) and the Spark operator (:mod:`.operator`)."""

from streamjoin.runtime.changelog_normalize.logic import ChangelogNormalize, normalize_change
from streamjoin.runtime.changelog_normalize.operator import changelog_normalize

__all__ = ["ChangelogNormalize", "changelog_normalize", "normalize_change"]
