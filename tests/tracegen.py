"""Builds ``gangstate.*/v1`` trace lines (JSON text) for tests that need wire records, with Pod
and PodGroup objects shaped like the API server's (as in ``tests/cases``)."""

from __future__ import annotations

import json
from typing import Any

BASE = "2026-11-02T09:00:00"
P = "gang.scheduling.koordinator.sh/"


def ts(seconds: float) -> str:
    """``BASE`` plus ``seconds`` (< 60 s past each minute is fine for tests), RFC 3339."""
    minutes, secs = divmod(seconds, 60)
    return f"2026-11-02T09:{int(minutes):02d}:{secs:09.6f}Z"


def pod(ns: str, name: str, t: float, rv: int, *, gang: str, min_available: int | None = None,
        groups: list[str] | None = None, type_: str = "ADDED", node: str | None = None,
        uid: str | None = None, extra: dict[str, str] | None = None,
        gates: tuple[str, ...] = ()) -> str:
    """One pod watch event line; ``gates`` become its ``spec.schedulingGates``."""
    ann: dict[str, str] = {P + "name": gang}
    if min_available is not None:
        ann[P + "min-available"] = str(min_available)
    if groups is not None:
        ann[P + "groups"] = json.dumps(groups)
    ann.update(extra or {})
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{ns}-{name}",
                     "resourceVersion": str(rv), "annotations": ann,
                     "creationTimestamp": ts(t)[:19] + "Z"},
        "spec": {"schedulerName": "koord-scheduler",
                 "containers": [{"name": "c", "image": "i",
                                 "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                 **({"nodeName": node} if node else {}),
                 **({"schedulingGates": [{"name": g} for g in gates]} if gates else {})},
        "status": {"phase": "Pending"},
    }
    return json.dumps({"schema": "gangstate.kube/v1", "observed_at": ts(t), "resource": "pods",
                       "type": type_, "object": obj})


def cycle(ns: str, name: str, t: float, number: int, stage: str, status: str, *, gang: str,
          reason: str = "", representative: str | None = None) -> str:
    """One cycle record line."""
    return json.dumps({"schema": "gangstate.cycle/v1", "observed_at": ts(t),
                       "scheduler": "koord-scheduler", "cycle": number,
                       "pod": {"namespace": ns, "name": name, "uid": f"uid-{ns}-{name}"},
                       "gang": gang, "gang_group": gang, "stage": stage, "status": status,
                       "reason": reason, "message": reason, "representative": representative,
                       "node": None})
