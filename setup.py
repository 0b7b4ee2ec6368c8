"""Build hook: compiles the functional core (``streams/core``) to C extensions with mypyc.

The core is plain, strictly typed Python (``mypy --strict`` passes on it); mypyc, the compiler
mypy itself ships with, turns those modules into C extensions that run the same code about
twice as fast (``docs/benchmarks.md``). Nothing else is compiled. ``GANGSTATE_PURE_CORE=1`` at
install time skips the compilation (the core then runs as Python); at run time it makes
``streams.core`` import its Python sources even when compiled modules exist
(``streams/core/__init__.py``). Everything else about the package is in ``pyproject.toml``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
CORE = sorted(".".join(p.relative_to(HERE / "streams" / "core").with_suffix("").parts)
              for p in (HERE / "streams" / "core").rglob("*.py") if p.name != "__init__.py")
"""The core modules compiled: every ``streams/core/**/<name>.py`` but the packages'
``__init__`` (which stay Python), as dotted names relative to ``streams.core`` (``fold``,
``rules.hold``)."""


def core_extensions() -> list:
    """mypyc extension modules for ``CORE``, plus a stamp of the sources they were built from
    (``streams/core/_compiled.json``: module -> sha256), which ``streams/core/__init__.py``
    checks so that an edited source is never shadowed by a stale compiled module."""
    if os.environ.get("GANGSTATE_PURE_CORE") == "1":
        return []
    from mypyc.build import mypycify

    here = HERE / "streams" / "core"
    sources = [f"streams/core/{name.replace('.', '/')}.py" for name in CORE]
    stamp = {name: hashlib.sha256((here / f"{name.replace('.', '/')}.py").read_bytes())
             .hexdigest() for name in CORE}
    (here / "_compiled.json").write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
    return mypycify(sources, opt_level="3", group_name="gangstate_core")


setup(ext_modules=core_extensions())
