"""The functional core of gangstate: gang membership and spec rules, the fold, the decisions.

Pure and deterministic: gang state and every diagnostic and command are functions of the event
log alone (the records' ``observed_at`` is the only clock). Imports nothing from Faust, Kafka,
aiokafka or Kubernetes (enforced by import-linter, see ``pyproject.toml``).

Compiled or not: ``pip install`` compiles the core modules with mypyc (``setup.py``); the same
sources then run as C extensions. Python imports a compiled module before its ``.py`` source,
so this package checks, once at import, that each compiled module was built from the source
next to it (``_compiled.json``: module -> sha256 of the source). When a source has changed
since the build, or ``GANGSTATE_PURE_CORE=1`` is set, every core module is imported from its
Python source instead, and ``COMPILED`` is false. ``bash .ci/setup.sh`` recompiles.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import Sequence

_HERE = Path(__file__).resolve().parent


def _source(name: str) -> Path:
    """The source of core module ``name`` (dotted, relative to ``streams.core``)."""
    return _HERE.joinpath(*name.split(".")).with_suffix(".py")


def _compiled_modules() -> list[str]:
    """The core modules with a compiled extension next to their source, as dotted names
    relative to ``streams.core`` (``fold``, ``rules.hold``)."""
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    found = set()
    for p in _HERE.rglob("*"):
        if any(p.name.endswith(s) for s in suffixes):
            parts = p.relative_to(_HERE).parent.parts + (p.name.split(".", 1)[0],)
            if _HERE.joinpath(*parts).with_suffix(".py").is_file():
                found.add(".".join(parts))
    return sorted(found)


def _stale(compiled: list[str]) -> list[str]:
    """Compiled modules whose source differs from the one they were built from."""
    try:
        stamp = json.loads((_HERE / "_compiled.json").read_text())
    except (OSError, ValueError):
        return compiled
    return [name for name in compiled
            if stamp.get(name) != hashlib.sha256(_source(name).read_bytes()).hexdigest()]


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Imports ``streams.core.<name>`` (``<name>`` dotted: ``rules.hold``) from its ``.py``
    source even when a compiled module exists."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        """The spec of the Python source of a core module; ``None`` for any other module."""
        if not fullname.startswith(__name__ + "."):
            return None
        source = _source(fullname[len(__name__) + 1:])
        if not source.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def _choose() -> bool:
    import sys

    compiled = _compiled_modules()
    if not compiled:
        return False
    if os.environ.get("GANGSTATE_PURE_CORE") == "1":
        sys.meta_path.insert(0, _SourcesFirst())
        return False
    stale = _stale(compiled)
    if stale:
        warnings.warn(f"streams.core: compiled {', '.join(stale)} older than the sources; "
                      f"running the Python sources (bash .ci/setup.sh recompiles)", stacklevel=2)
        sys.meta_path.insert(0, _SourcesFirst())
        return False
    return True


COMPILED: bool = _choose()
"""True when the core modules run compiled by mypyc, false when they run as Python."""
