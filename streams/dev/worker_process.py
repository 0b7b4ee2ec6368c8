"""Run ``gangstate worker`` as a child process (for the demo and the tests).

Where it sits: the shell. The worker runs in its own process, as in production, so the demo and
the end-to-end tests exercise exactly the command a user runs. Settings travel as environment
variables (``streams.settings``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from streams.settings import SECURITY_VARIABLES, Settings


def worker_env(settings: Settings, datadir: str | None = None) -> dict[str, str]:
    """Environment of a worker child process for ``settings``."""
    env = dict(os.environ)
    env.update({
        "KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap or "",
        "GANGSTATE_TOPIC_PREFIX": settings.topics.prefix,
        "GANGSTATE_PARTITIONS": str(settings.partitions),
        "GANGSTATE_APP_ID": settings.app_id,
        "GANGSTATE_GRACE_SECONDS": str(settings.fold.grace_seconds),
        "GANGSTATE_STRANDED_SECONDS": str(settings.fold.stranded_seconds),
        "GANGSTATE_MAX_SKEW_SECONDS": str(settings.max_skew_seconds),
        "GANGSTATE_HOLDS": "on" if settings.fold.holds else "off",
        "GANGSTATE_HOLD_TTL_SECONDS": str(settings.fold.hold_ttl_seconds),
        "GANGSTATE_HOLD_RENEW_SECONDS": str(settings.fold.hold_renew_seconds),
        "GANGSTATE_HOLD_MAX_SECONDS": str(settings.fold.hold_max_seconds),
    })
    for name in SECURITY_VARIABLES:  # the settings' own security, not the parent's
        env.pop(name, None)
    env.update(settings.security.env())
    if datadir:
        env["GANGSTATE_DATA_DIR"] = datadir
    return env


@contextlib.contextmanager
def running_worker(settings: Settings, log_path: Path | None = None,
                   extra_args: tuple[str, ...] = (), ready_timeout: float | None = 120.0,
                   ) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``gangstate worker`` for ``settings`` in a child process, wait until it has joined
    its consumer group (``ready_timeout`` seconds at most; ``None``: do not wait), yield it,
    and stop it (SIGTERM, then SIGKILL after 20 s) on exit. The worker's output goes to
    ``log_path`` (a temporary file when ``None``). Raises ``RuntimeError`` if the worker exits
    early or is not ready in time."""
    from streams.kafka.reading import wait_group_stable

    with contextlib.ExitStack() as stack:
        datadir = stack.enter_context(tempfile.TemporaryDirectory(prefix="gangstate-worker-"))
        log = open(log_path or Path(datadir) / "worker.log", "wb")
        stack.callback(log.close)
        proc = subprocess.Popen([sys.executable, "-m", "streams.cli", "worker", *extra_args],
                                env=worker_env(settings, datadir), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if ready_timeout is not None and not wait_group_stable(
                    settings.bootstrap or "", settings.app_id, ready_timeout,
                    alive=lambda: proc.poll() is None, security=settings.security):
                log.flush()
                tail = Path(log.name).read_text(errors="replace")[-2000:]
                raise RuntimeError(f"worker not ready after {ready_timeout} s "
                                   f"(status {proc.poll()}); log tail:\n{tail}")
            yield proc
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited early with status {proc.returncode}; "
                                   f"log: {log.name}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
