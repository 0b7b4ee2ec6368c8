"""Helpers of the cluster tier: polling, the Events of a pod by writer, the scenario report.

Imported as ``tests.cluster.kube`` by the conftest and the tests alike (one module, one
:data:`REPORT`)."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from kubernetes import client

from streams.dev.localcluster import pod_events
from tests.doubles.apiserver import eventually


def wait_for(what: str, probe: Callable[[], Any], timeout: float, interval: float = 1.0,
             describe: Callable[[], str] = lambda: "") -> Any:
    """Poll ``probe`` (``eventually`` of the test API server) until it returns something
    truthy; fail with ``what`` (and ``describe()``) after ``timeout`` seconds."""
    try:
        return eventually(probe, timeout, interval)
    except AssertionError:
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{describe()}")


def gangstate_events(core: client.CoreV1Api, namespace: str, pod: str,
                     uid: str | None = None) -> list[dict[str, Any]]:
    """The Events ``gangstate`` wrote on a pod (of that ``uid`` when given), as ``kubectl
    describe pod`` lists them."""
    return [e for e in pod_events(core, namespace, pod, uid) if e["from"] == "gangstate"]


def scheduler_events(core: client.CoreV1Api, namespace: str, pod: str) -> list[dict[str, Any]]:
    """The Events koord-scheduler wrote on a pod."""
    return [e for e in pod_events(core, namespace, pod) if e["from"] == "koord-scheduler"]


#: scenario namespace -> {"scheduler": Counter of reasons, "gangstate": Counter of reasons}
REPORT: dict[str, dict[str, Any]] = {}


def report_table() -> str:
    """:data:`REPORT` as a Markdown table (empty when no scenario was recorded)."""
    if not REPORT:
        return ""
    lines = ["| scenario | scheduler's own Events | gangstate's Events on the pods |",
             "|---|---|---|"]

    def fmt(counts: Any) -> str:
        return ", ".join(f"{r} x{n}" for r, n in sorted(counts.items())) or "none"

    for ns, row in sorted(REPORT.items()):
        lines.append(f"| {ns} ({row['pods']} pods) | {fmt(row['scheduler'])} | "
                     f"{fmt(row['gangstate'])} |")
    return "\n".join(lines)


def record_scenario(core: client.CoreV1Api, namespace: str) -> None:
    """Count, for the report, the Events each writer left on the pods of ``namespace``."""
    from collections import Counter

    scheduler: Counter[str] = Counter()
    mine: Counter[str] = Counter()
    pods = core.list_namespaced_pod(namespace).items
    for p in pods:
        for e in pod_events(core, namespace, p.metadata.name, p.metadata.uid):
            target = mine if e["from"] == "gangstate" else scheduler
            target[e["reason"]] += e["count"]
    REPORT[namespace] = {"pods": len(pods), "scheduler": scheduler, "gangstate": mine}
