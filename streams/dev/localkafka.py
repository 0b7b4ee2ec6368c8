"""Access to the embedded default Kafka (``deploy.kafka.broker``) from the package.

Where it sits: the shell. ``deploy/kafka/broker.py`` is a standard-library module (also a script
of its own); this module imports it, so that ``gangstate demo`` and the tests start the same
broker. The checkout (for the files that are data: manifests, recorded traces) is found beside
this package (an editable install, as the README's set-up command makes) or at
``GANGSTATE_HOME``.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType


def repo_root() -> Path:
    """The gangstate checkout: ``GANGSTATE_HOME`` or the folder above this package."""
    home = os.environ.get("GANGSTATE_HOME")
    return Path(home) if home else Path(__file__).resolve().parents[2]


def broker_module() -> ModuleType:
    """The module ``deploy.kafka.broker`` (imported on first use: the worker, watch and sink never
    need it). Raises ``FileNotFoundError`` when the ``deploy`` package is not installed (the
    image ships none: set ``KAFKA_BOOTSTRAP_SERVERS``)."""
    try:
        from deploy.kafka import broker
    except ModuleNotFoundError as err:
        raise FileNotFoundError(f"{err.name} is not installed: run from a gangstate checkout or "
                                "set KAFKA_BOOTSTRAP_SERVERS") from None
    return broker
