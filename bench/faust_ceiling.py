"""What Faust itself costs per record here: the same stream, agents that do less and less.

``python bench/faust_ceiling.py [--gangs N] [--modes null,decode,fold]`` preloads a synthetic
``gang-events`` topic (8 partitions, like ``bench/run.py``) and, for each mode, starts a Faust
worker process whose one agent reads it exactly as gangstate's worker does
(``PatchedApp``, the batch path ``app.batches(topic, 500)``, concurrency 1) and does:

- ``null``: nothing (counts the events): the ceiling of any Faust agent on this machine;
- ``decode``: ``decode_input`` of each value;
- ``fold``: ``decode_input`` and ``PartitionFold.feed`` into a dict per partition (no table, no
  changelog, no outputs sent);
- ``stock``: nothing, through Faust's own per-event path (``faust.App``,
  ``stream.take_events(500, 0.01)``): what the batch path is measured against.

Each prints records/s from the first event to the last; ``bench/run.py``'s end-to-end figure is
the full worker (plus the table, its changelog and the outputs). Figures are in
``docs/benchmarks.md``. Bench only, not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

MODES = ("null", "decode", "fold", "stock")


def agent_process() -> None:
    """The child: a Faust app with one agent of mode ``CEILING_MODE`` over ``CEILING_TOPIC``;
    writes ``{"records", "seconds", "cpu_seconds"}`` (wall and process CPU time) to
    ``CEILING_OUT`` once ``CEILING_RECORDS`` are read. Modes ``null``, ``decode`` and ``fold``
    read the topic as the worker does (``PatchedApp``, ``batch_topic``, ``app.batches(topic,
    BATCH)``); ``stock`` is Faust's own per-event path (``faust.App``, ``stream.take_events(BATCH,
    0.01)``), doing nothing with the records."""
    import faust

    from streams.core.fold import PartitionFold
    from streams.wire.decoding import decode_input
    from streams.worker.app import BATCH, BUFFERED
    from streams.worker.faust_patches import PatchedApp

    mode, want = os.environ["CEILING_MODE"], int(os.environ["CEILING_RECORDS"])
    out = Path(os.environ["CEILING_OUT"])
    partitions = int(os.environ["CEILING_PARTITIONS"])
    app_class = faust.App if mode == "stock" else PatchedApp
    app = app_class(os.environ["CEILING_APP"], broker=f"kafka://{os.environ['CEILING_BOOT']}",
                    store="memory://", datadir=tempfile.mkdtemp(prefix="ceiling-"),
                    topic_partitions=partitions, consumer_auto_offset_reset="earliest",
                    web_enabled=False)
    topic = app.topic(os.environ["CEILING_TOPIC"], key_type=bytes, value_type=bytes,
                      key_serializer="raw", value_serializer="raw", partitions=partitions)
    folds: dict[int, PartitionFold] = {}
    seen = {"n": 0, "t0": 0.0, "c0": 0.0}

    def count(n: int) -> None:
        if not seen["n"]:
            seen["t0"], seen["c0"] = time.monotonic(), time.process_time()
        seen["n"] += n
        if seen["n"] >= want and not out.exists():
            out.write_text(json.dumps({
                "records": seen["n"], "seconds": time.monotonic() - seen["t0"],
                "cpu_seconds": round(time.process_time() - seen["c0"], 2)}))

    if mode == "stock":
        @app.agent(topic, concurrency=1)
        async def stock(stream):  # noqa: ANN001 - Faust's stream
            async for events in stream.take_events(BATCH, within=0.01):
                count(len(events))
    else:
        app.batch_topic(topic, max_buffered=BUFFERED)

        @app.agent(topic, concurrency=1)
        async def ceiling(stream):  # noqa: ANN001 - Faust's stream
            async for messages in app.batches(topic, BATCH):
                if mode != "null":
                    for message in messages:
                        decoded = decode_input(message.value)
                        if mode == "fold" and decoded.record is not None:
                            p = message.partition
                            fold = folds.get(p)
                            if fold is None:
                                fold = folds[p] = PartitionFold({}, loopback=False)
                            if decoded.record is not None:
                                fold.feed(decoded.key, decoded.record)
                count(len(messages))

    faust.Worker(app, loglevel="warning", quiet=True).execute_from_commandline()


def run_mode(bootstrap: str, topic: str, records: int, mode: str, partitions: int,
             profile: str | None = None) -> dict:
    """Start one ceiling agent process in ``mode``, wait for its figure, stop it; with
    ``profile``, py-spy records the agent process into that file (raw collapsed stacks).
    Returns records, seconds, cpu_seconds, records_per_s and the agent's peak RSS (bytes)."""
    import uuid

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = {**os.environ, "CEILING_MODE": mode, "CEILING_RECORDS": str(records),
               "CEILING_OUT": str(out), "CEILING_PARTITIONS": str(partitions),
               "CEILING_APP": f"ceiling-{mode}-{uuid.uuid4().hex[:6]}",
               "CEILING_BOOT": bootstrap, "CEILING_TOPIC": topic}
        proc = subprocess.Popen([sys.executable, __file__, "--agent", "worker"], env=env,
                                stdout=subprocess.DEVNULL, stderr=open(Path(tmp) / "log", "wb"),
                                start_new_session=True)
        spy = None
        spy_path = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or \
            shutil.which("py-spy")
        if profile and spy_path is None:
            print("profile skipped: py-spy is not installed", flush=True)
        elif profile:
            spy = subprocess.Popen([spy_path, "record",
                                    "--pid", str(proc.pid), "--rate", "200", "--format", "raw",
                                    "-o", profile], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120 + records / 500
            while not out.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{mode} agent failed: "
                                       f"{(Path(tmp) / 'log').read_text()[-2000:]}")
                time.sleep(0.2)
            time.sleep(0.1)
            result = json.loads(out.read_text())
            status = Path(f"/proc/{proc.pid}/status").read_text()
            result["peak_rss_bytes"] = next(int(line.split()[1]) * 1024 for line in
                                            status.splitlines() if line.startswith("VmHWM:"))
        finally:
            if spy is not None:
                spy.send_signal(2)
                spy.wait(timeout=30)
            os.killpg(proc.pid, 15)
            proc.wait(timeout=30)
    result["records_per_s"] = round(result["records"] / result["seconds"])
    result["seconds"] = round(result["seconds"], 2)
    return result


def main(argv: list[str] | None = None) -> int:
    """Preload the topic, measure each mode, print one line per mode and a JSON line."""
    if "--agent" in (argv or sys.argv[1:]):
        sys.argv = [sys.argv[0], "worker", "-l", "warning"]
        agent_process()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gangs", type=int, default=300, help="synthetic gangs (~95 records each)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of null, decode, fold")
    ap.add_argument("--profile", action="store_true",
                    help="py-spy each agent; summaries in bench/profiles/faust-<mode>.txt")
    args = ap.parse_args(argv)
    import kafkabench  # the same synthetic topic and local Kafka as bench/run.py
    import synthetic

    from streams.kafka.publishing import ensure_topics
    from streams.dev.localkafka import broker_module

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    broker = None if bootstrap else broker_module().LocalKafka(heap="1g")
    try:
        if broker is not None:
            bootstrap = broker.start(timeout=120)
        settings = kafkabench.make_settings(bootstrap, "ceiling")
        ensure_topics(settings)
        items = list(synthetic.trace(args.gangs))
        kafkabench.preload(settings, items)
        results: dict = {"records": len(items), "loadavg_start": os.getloadavg()[0]}
        for mode in args.modes.split(","):
            raw = str(Path(__file__).resolve().parent / "profiles" / f"faust-{mode}.raw") if args.profile else None
            results[mode] = run_mode(bootstrap, settings.topics.gang_events, len(items), mode,
                                     kafkabench.PARTITIONS, raw)
            if raw and Path(raw).exists():
                from profiling import summarize_collapsed

                summarize_collapsed(raw, raw[:-4] + ".txt",
                                    f"Faust agent ({mode}) over {len(items)} records")
                Path(raw).unlink()
            print(f"faust agent, {mode}: {results[mode]['records_per_s']}/s", flush=True)
        results["loadavg_end"] = os.getloadavg()[0]
        print(json.dumps(results), flush=True)
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
