"""Re-export of ``streams.dev.worker_process.running_worker`` for tests (``gangstate worker`` as a
child process)."""

from streams.dev.worker_process import running_worker

__all__ = ["running_worker"]
