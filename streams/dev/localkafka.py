"""Access to the embedded default Kafka (``deploy/kafka/broker.py``) from the package.

Where it sits: the shell. ``deploy/kafka/broker.py`` is a standard-library script (usable on its
own); this module loads it from the checkout so that ``gangstate demo`` and the tests start the
same broker. The checkout is found beside this package (an editable install, as the README's
set-up command makes) or at ``GANGSTATE_HOME``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


def repo_root() -> Path:
    """The gangstate checkout: ``GANGSTATE_HOME`` or the folder above this package."""
    home = os.environ.get("GANGSTATE_HOME")
    return Path(home) if home else Path(__file__).resolve().parents[2]


def load_script(name: str, *parts: str) -> ModuleType:
    """Import the standard-library script at ``<checkout>/<parts...>`` (once) as module
    ``name`` and return it. Raises ``FileNotFoundError`` when the checkout lacks it (a
    non-editable install: set ``GANGSTATE_HOME``)."""
    if name in sys.modules:
        return sys.modules[name]
    path = repo_root().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: set GANGSTATE_HOME to a gangstate checkout")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def broker_module() -> ModuleType:
    """Import ``deploy/kafka/broker.py`` (once) and return it. Raises ``FileNotFoundError`` when
    the checkout has no ``deploy/kafka/broker.py`` (a non-editable install: set
    ``GANGSTATE_HOME`` or ``KAFKA_BOOTSTRAP_SERVERS``)."""
    return load_script("gangstate_local_kafka", "deploy", "kafka", "broker.py")
