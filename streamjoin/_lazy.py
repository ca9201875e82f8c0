"""Package exports imported on first use (PEP 562), so importing a package stays cheap.

``import streamjoin`` or ``import streamjoin.connectors.kafka_admin`` must not import PySpark,
sqlglot or pyarrow for names the caller does not touch.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose public names live in submodules.

    Args:
        package: the package's ``__name__``.
        exports: public name → module that defines it (absolute module path).

    Returns:
        ``(__getattr__, __dir__)``: the first imports the defining module on first access, keeps the
        value in the package and returns it; unknown names raise ``AttributeError``.
    """

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
