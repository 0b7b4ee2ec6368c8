"""``gangstate worker > worker.log``: the worker's start and stop write no terminal escapes
into a ``stdout`` that is a file (``RateLimitedWorker`` has no Faust spinner,
streams/worker/faust_patches.py).

Faust's own ``faust.Worker`` writes ``\\x1b[?25l`` (cursor hide) when its spinner first
turns, on the first log record at WARNING, and ``\\x08\\x1b[?25h`` (backspace, cursor show)
when it finishes at start-up's end, file or terminal alike: measured here with the same steps
as the test below, ``'a warning\\n\\x1b[?25l\\x08\\x1b[?25h'``. The steps are the hooks the
spinner lives in (``on_setup_root_logger``, a log record, the end of start-up, the shutdown);
the rest of ``execute_from_commandline`` needs a broker."""

from __future__ import annotations

import logging
from pathlib import Path

from streams.settings import Settings, Topics
from streams.worker.app import create_app, shared_state_warning, start_line
from streams.worker.faust_patches import RateLimitedWorker


def test_worker_writes_no_escape_codes_to_a_file(tmp_path: Path) -> None:
    app = create_app(Settings(bootstrap="127.0.0.1:1"), datadir=str(tmp_path / "data"))
    log = logging.getLogger("test-worker-output")  # not the root logger: the test's own
    log.propagate = False
    with open(tmp_path / "worker.log", "w") as out:
        handler = logging.StreamHandler(out)
        log.addHandler(handler)
        try:
            worker = RateLimitedWorker(app, loglevel="warning", quiet=True,
                                       stdout=out, stderr=out)
            assert worker.spinner is None
            worker.on_setup_root_logger(log, logging.WARNING)
            log.warning("a warning")
            worker._on_startup_end_spinner()  # start-up finished
            worker.on_worker_shutdown()
        finally:
            log.removeHandler(handler)
    written = (tmp_path / "worker.log").read_text()
    assert written == "a warning\n"
    assert "\x1b" not in written and "\x08" not in written


def test_the_worker_says_what_it_folds_once_kafka_answered() -> None:
    """``start_line``: the one line ``gangstate worker`` writes before it joins its consumer
    group (a new user saw a worker that said nothing at all)."""
    settings = Settings(bootstrap="127.0.0.1:9092", topics=Topics("team."), app_id="gs-a")
    assert start_line(settings, 6067, "0.0.0.0") == (
        "gangstate worker: folding team.gang-events at 127.0.0.1:9092 (consumer group gs-a) "
        "into team.diagnostics and team.commands; views and /metrics on http://0.0.0.0:6067 "
        "(/readyz: 200 once its partitions are assigned)")
    assert start_line(settings, None, "127.0.0.1").endswith(
        "; no views (--http-port N serves them)")


def test_a_prefix_of_its_own_with_the_default_app_id_is_warned() -> None:
    """The changelog and the consumer group are named by the app id alone: a worker on topics
    ``nu2.`` with app id ``gangstate`` shares its gang table with every worker of that app id
    (a new user's worker showed another cluster's gangs). Warned then only."""
    assert shared_state_warning(Settings(topics=Topics("nu2."))) == (
        "gangstate worker: warning: topic prefix 'nu2.' with the default app id 'gangstate': "
        "the gang table (changelog gangstate-gangs-changelog) and the consumer group are those "
        "of every worker of app id 'gangstate', whatever its topics; set GANGSTATE_APP_ID "
        "(e.g. GANGSTATE_APP_ID=gangstate-nu2) to keep this worker's state apart")
    assert shared_state_warning(Settings()) is None
    assert shared_state_warning(Settings(topics=Topics("nu2."), app_id="gs-nu2")) is None


def test_the_app_id_suggested_for_a_prefix_of_its_own() -> None:
    """``own_app_id``, which the worker's warning and the sink's (its consumer group
    ``gangstate-event-sink`` is the app id's too) both suggest: ``gangstate-nu41`` for
    topics ``nu41.``; nothing for the default prefix or an app id chosen."""
    from streams.settings import own_app_id

    assert own_app_id(Settings(topics=Topics("nu41."))) == "gangstate-nu41"
    assert own_app_id(Settings(topics=Topics("___"))) == "gangstate-own"
    assert own_app_id(Settings()) is None
    assert own_app_id(Settings(topics=Topics("nu41."), app_id="gs-nu41")) is None
