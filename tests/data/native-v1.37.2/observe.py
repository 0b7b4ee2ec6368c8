"""Record what Kubernetes' own gang scheduling (k8s.io/kubernetes v1.37.2, kube-scheduler's
GangScheduling plugin) does in each scenario of issue 26 item 1, on the native local control
plane (``deploy/cluster/controlplane.py run --native``), into this folder: per scenario
``pods.json``, ``podgroups.json`` (and ``compositepodgroups.json``, ``workloads.json``,
``jobs.json`` where they exist), ``events.json``, ``scheduler-log-excerpt.txt`` and the
timeline in ``notes.md`` (what was done and seen, seconds from the scenario's start).

    .venv/bin/python deploy/cluster/controlplane.py run --native --workdir /tmp/native-cp &
    .venv/bin/python tests/data/native-v1.37.2/observe.py /tmp/native-cp [--v N] [a b c ...]

(``--v N`` only labels the files with the scheduler's verbosity: the control plane runs
kube-scheduler at ``--v 4``; scenarios b and e here were recorded with it restarted by hand at
``--v 5``, which logs what happens to a pod whose PodGroup is missing.)

Scenarios run one after another (each in a namespace of its own, deleted after) on the two
default nodes of 1 ``nvidia.com/gpu`` each, so they never compete for the GPUs. Nothing here
is a test: the tests are ``tests/cluster/test_native_controlplane.py``.
"""

from __future__ import annotations

import json
import re
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
#: the scheduler's --v, for the files' headers (see the module's docstring)
VERBOSITY = 4
PG = "/apis/scheduling.k8s.io/v1beta1"
CPG = "/apis/scheduling.k8s.io/v1alpha3"


class Api:
    """The admin's requests to the native control plane of ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        cfg = json.loads((workdir / "kubeconfigs" / "admin.yaml").read_text())
        self.server = cfg["clusters"][0]["cluster"]["server"]
        self.ctx = ssl.create_default_context(
            cafile=cfg["clusters"][0]["cluster"]["certificate-authority"])
        self.token = cfg["users"][0]["user"]["token"]
        self.log = workdir / "logs" / "kube-scheduler.log"

    def __call__(self, method: str, path: str, body: Any = None,
                 ctype: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": ctype})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=20) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            raise RuntimeError(f"{method} {path}: {err.code} {err.read().decode()[:500]}") \
                from None


def pod(name: str, *, group: str | None = None, gpu: int = 1, cpu: str = "100m",
        gates: list[str] = (), priority_class: str | None = None,
        annotations: dict[str, str] | None = None, grace: int = 0) -> dict[str, Any]:
    limits = {"cpu": cpu, **({"nvidia.com/gpu": str(gpu)} if gpu else {})}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox",
                        "resources": {"requests": limits, "limits": limits}}],
        "terminationGracePeriodSeconds": grace}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations or {}}, "spec": spec}


def podgroup(name: str, min_count: int, *, parent: str | None = None,
             workload: tuple[str, str] | None = None,
             priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if workload:
        spec["workloadRef"] = {"workloadName": workload[0], "templateName": workload[1]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": spec}


def clean(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for item in items:
        item.get("metadata", {}).pop("managedFields", None)
    return items


def occurrences(event: dict[str, Any]) -> int:
    return int((event.get("series") or {}).get("count") or event.get("count") or 1)


class Scenario:
    def __init__(self, api: Api, key: str, title: str) -> None:
        self.api, self.key, self.title = api, key, title
        self.ns = f"native-{key}"
        self.dir = HERE / key
        self.dir.mkdir(exist_ok=True)
        self.t0 = time.monotonic()
        self.wall0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.lines: list[str] = []
        self.log_from = api.log.stat().st_size if api.log.exists() else 0

    def note(self, text: str) -> None:
        line = f"- t={time.monotonic() - self.t0:6.1f} s: {text}"
        print(f"[{self.key}] {line}", flush=True)
        self.lines.append(line)

    def create_namespace(self) -> None:
        self.api("POST", "/api/v1/namespaces", {"metadata": {"name": self.ns}})
        self.wait("the default ServiceAccount", lambda: self.api(
            "GET", f"/api/v1/namespaces/{self.ns}/serviceaccounts/default"), 60)

    def create(self, obj: dict[str, Any]) -> None:
        kind = obj["kind"]
        path = {"Pod": f"/api/v1/namespaces/{self.ns}/pods",
                "PodGroup": f"{PG}/namespaces/{self.ns}/podgroups",
                "Workload": f"{PG}/namespaces/{self.ns}/workloads",
                "CompositePodGroup": f"{CPG}/namespaces/{self.ns}/compositepodgroups",
                "Job": f"/apis/batch/v1/namespaces/{self.ns}/jobs"}[kind]
        self.api("POST", path, obj)
        self.note(f"created {kind} {obj['metadata']['name']}")

    def pods(self) -> list[dict[str, Any]]:
        return self.api("GET", f"/api/v1/namespaces/{self.ns}/pods")["items"]

    def podgroups(self) -> list[dict[str, Any]]:
        return self.api("GET", f"{PG}/namespaces/{self.ns}/podgroups")["items"]

    def events(self) -> list[dict[str, Any]]:
        return self.api("GET", f"/api/v1/namespaces/{self.ns}/events")["items"]

    def wait(self, what: str, probe: Callable[[], Any], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = probe()
            except RuntimeError:
                got = None
            if got:
                return got
            if time.monotonic() > deadline:
                self.note(f"NOT SEEN within {timeout:.0f} s: {what}")
                return None
            time.sleep(0.5)

    def running(self, names: list[str]) -> bool:
        by = {p["metadata"]["name"]: p for p in self.pods()}
        return all(by.get(n, {}).get("status", {}).get("phase") == "Running" for n in names)

    def pg_condition(self, name: str, ctype: str = "PodGroupInitiallyScheduled"
                     ) -> dict[str, Any] | None:
        for pg in self.podgroups():
            if pg["metadata"]["name"] == name:
                for c in pg.get("status", {}).get("conditions", []) or []:
                    if c["type"] == ctype:
                        return c
        return None

    def failed_scheduling_count(self) -> int:
        """FailedScheduling occurrences the API shows: kube-scheduler writes events.k8s.io/v1
        Events, so a repeat is ``series.count`` on an Event (``count`` is empty)."""
        return sum(occurrences(e) for e in self.events() if e.get("reason") == "FailedScheduling")

    def snapshot(self, label: str) -> None:
        """``pods-<label>.json`` and ``podgroups-<label>.json`` now (while held, say)."""
        (self.dir / f"pods-{label}.json").write_text(json.dumps(clean(self.pods()), indent=1)
                                                    + "\n")
        (self.dir / f"podgroups-{label}.json").write_text(
            json.dumps(clean(self.podgroups()), indent=1) + "\n")
        self.note(f"saved pods-{label}.json and podgroups-{label}.json")

    def save(self, summary: str = "") -> None:
        (self.dir / "pods.json").write_text(json.dumps(clean(self.pods()), indent=1) + "\n")
        (self.dir / "podgroups.json").write_text(
            json.dumps(clean(self.podgroups()), indent=1) + "\n")
        events = sorted(clean(self.events()), key=lambda e: (
            e.get("firstTimestamp") or e.get("eventTime") or "", e["metadata"]["name"]))
        (self.dir / "events.json").write_text(json.dumps(events, indent=1) + "\n")
        for name, path in (("compositepodgroups", f"{CPG}/namespaces/{self.ns}/compositepodgroups"),
                           ("workloads", f"{PG}/namespaces/{self.ns}/workloads"),
                           ("jobs", f"/apis/batch/v1/namespaces/{self.ns}/jobs")):
            items = clean(self.api("GET", path)["items"])
            if items:
                (self.dir / f"{name}.json").write_text(json.dumps(items, indent=1) + "\n")
        self.save_log()
        table = [f"| {e.get('involvedObject', {}).get('kind')} "
                 f"{e.get('involvedObject', {}).get('name')} | {e.get('type')} | "
                 f"{e.get('reason')} | "
                 f"{e.get('reportingComponent') or e.get('source', {}).get('component')} | "
                 f"{occurrences(e)}{' (series)' if e.get('series') else ''} | "
                 f"{e.get('eventTime') or e.get('firstTimestamp')} | {e.get('message')} |"
                 for e in events]
        text = [f"# Scenario {self.key}: {self.title}", "",
                f"Recorded {self.wall0} on the native control plane (k8s.io/kubernetes v1.37.2, "
                f"kube-scheduler --v {VERBOSITY}, 2 nodes with 1 nvidia.com/gpu each), "
                f"namespace "
                f"`{self.ns}`, by `observe.py {self.key}`.", "", "## Timeline", "", *self.lines,
                "", "## Events (core/v1 view)", "",
                "| object | type | reason | from | occurrences | first seen | message |",
                "|---|---|---|---|---|---|---|",
                *table, ""]
        if summary:
            text += ["## What it shows", "", summary, ""]
        (self.dir / "notes.md").write_text("\n".join(text))

    def save_log(self, limit: int = 80) -> None:
        """The scheduler's log lines about this namespace: the first and last ``limit/2``, and
        how often each message occurred (the text up to the first key=value)."""
        with open(self.api.log, "rb") as fh:
            fh.seek(self.log_from)
            raw = fh.read().decode(errors="replace").splitlines()
        mine = [line for line in raw if f"{self.ns}/" in line or f'"{self.ns}"' in line]
        counts = Counter(re.sub(r'^\S+ \S+ +\d+ \S+\] ', "", line).split(' "')[0].split(" pod=")[0]
                         [:140] for line in mine)
        head = mine if len(mine) <= limit else mine[:limit // 2] + [
            f"... {len(mine) - limit} lines left out ..."] + mine[-limit // 2:]
        out = [f"# kube-scheduler --v {VERBOSITY} log lines naming namespace {self.ns}: "
               f"{len(mine)} in all",
               "# message counts:"] + [f"#   {n:6d}  {m}" for m, n in counts.most_common(40)]
        (self.dir / "scheduler-log-excerpt.txt").write_text("\n".join(out + head) + "\n")

    def delete_namespace(self) -> None:
        self.api("DELETE", f"/api/v1/namespaces/{self.ns}")
        self.wait("the namespace gone", lambda: not any(
            n["metadata"]["name"] == self.ns
            for n in self.api("GET", "/api/v1/namespaces")["items"]), 120)


def describe_pods(s: Scenario) -> str:
    out = []
    for p in sorted(s.pods(), key=lambda p: p["metadata"]["name"]):
        st = p.get("status", {})
        conds = ", ".join(f"{c['type']}={c['status']}"
                          + (f"/{c['reason']}" if c.get("reason") else "")
                          for c in st.get("conditions", []) or [])
        out.append(f"{p['metadata']['name']}: phase {st.get('phase')}, node "
                   f"{p['spec'].get('nodeName')}, nominated {st.get('nominatedNodeName')}, "
                   f"conditions [{conds}]")
    return "; ".join(out)


def describe_pgs(s: Scenario) -> str:
    out = []
    for pg in s.podgroups():
        conds = ", ".join(f"{c['type']}={c['status']}/{c.get('reason')}: {c.get('message')!r}"
                          for c in pg.get("status", {}).get("conditions", []) or [])
        out.append(f"{pg['metadata']['name']}: [{conds}]")
    return "; ".join(out) or "(no PodGroup)"


def observe(s: Scenario, seconds: float, every: float = 10.0) -> None:
    """Note the pods, PodGroups and FailedScheduling count every ``every`` s for ``seconds``."""
    end = time.monotonic() + seconds
    while True:
        s.note(f"pods: {describe_pods(s)} | podgroups: {describe_pgs(s)} | "
               f"FailedScheduling count so far: {s.failed_scheduling_count()}")
        if time.monotonic() >= end:
            return
        time.sleep(min(every, max(end - time.monotonic(), 0.1)))


# -- the scenarios ---------------------------------------------------------------------------


def scenario_a(api: Api) -> Scenario:
    s = Scenario(api, "a-too-few-pods", "PodGroup minCount 3, only 2 pods")
    s.create_namespace()
    s.create(podgroup("g", 3))
    for i in range(2):
        s.create(pod(f"g-{i}", group="g"))
    observe(s, 30)
    s.snapshot("held")
    s.create(pod("g-2", group="g", gpu=0))
    s.note("third pod (no GPU, so the gang fits) added")
    s.wait("all three Running", lambda: s.running(["g-0", "g-1", "g-2"]), 60)
    observe(s, 5)
    return s


def scenario_b(api: Api) -> Scenario:
    s = Scenario(api, "b-podgroup-missing", "pods name a PodGroup that does not exist yet")
    s.create_namespace()
    for i in range(2):
        s.create(pod(f"m-{i}", group="m"))
    observe(s, 30)
    s.snapshot("held")
    s.create(podgroup("m", 2))
    s.wait("both Running", lambda: s.running(["m-0", "m-1"]), 60)
    observe(s, 5)
    return s


def scenario_c(api: Api) -> Scenario:
    s = Scenario(api, "c-composite-short-of-quorum",
                 "CompositePodGroup minGroupCount 2 over two PodGroups, one short of pods")
    s.create_namespace()
    s.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
              "metadata": {"name": "w"},
              "spec": {"podGroupTemplates": [],
                       "compositePodGroupTemplates": [{
                           "name": "root",
                           "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                           "podGroupTemplates": [
                               {"name": "c1", "schedulingPolicy": {"gang": {"minCount": 1}}},
                               {"name": "c2", "schedulingPolicy": {"gang": {"minCount": 2}}}]}]}})
    s.create({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
              "metadata": {"name": "root"},
              "spec": {"workloadRef": {"workloadName": "w", "templateName": "root"},
                       "schedulingPolicy": {"gang": {"minGroupCount": 2}}}})
    s.create(podgroup("c1", 1, parent="root", workload=("w", "c1")))
    s.create(podgroup("c2", 2, parent="root", workload=("w", "c2")))
    s.create(pod("c1-0", group="c1", gpu=0))
    s.create(pod("c2-0", group="c2", gpu=0))
    observe(s, 30)
    s.snapshot("held")
    s.create(pod("c2-1", group="c2", gpu=0))
    s.note("second pod of c2 added: quorum 2 of 2 child groups")
    s.wait("all three Running", lambda: s.running(["c1-0", "c2-0", "c2-1"]), 60)
    observe(s, 5)
    return s


def scenario_d(api: Api, minutes: float = 7.0) -> Scenario:
    s = Scenario(api, "d-never-fits", "PodGroup minCount 3, 3 pods of 1 GPU, 2 GPUs in all")
    s.create_namespace()
    s.create(podgroup("n", 3))
    for i in range(3):
        s.create(pod(f"n-{i}", group="n"))
    observe(s, minutes * 60, every=30)
    return s


def scenario_e(api: Api) -> Scenario:
    s = Scenario(api, "e-gated-member", "PodGroup minCount 3, 3 pods, one with a scheduling gate")
    s.create_namespace()
    s.create(podgroup("e", 3))
    s.create(pod("e-0", group="e", gpu=0))
    s.create(pod("e-1", group="e", gpu=0))
    s.create(pod("e-2", group="e", gpu=0, gates=["example.com/hold"]))
    observe(s, 30)
    s.snapshot("held")
    api("PATCH", f"/api/v1/namespaces/{s.ns}/pods/e-2", {"spec": {"schedulingGates": None}},
        "application/merge-patch+json")
    s.note("scheduling gate of e-2 removed")
    s.wait("all three Running", lambda: s.running(["e-0", "e-1", "e-2"]), 60)
    observe(s, 5)
    return s


def job(name: str, parallelism: int, gang: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parallelism": parallelism, "completions": parallelism,
        "template": {"metadata": {"annotations": {"gangstate.local/run-for": "30s"}},
                     "spec": pod("x")["spec"] | {"restartPolicy": "Never"}}}
    if gang:
        spec["scheduling"] = {"schedulingPolicy": {"gang": {}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def scenario_f(api: Api) -> Scenario:
    s = Scenario(api, "f-job-workload", "Jobs with WorkloadWithJob: gang policy and default")
    s.create_namespace()
    s.create(job("train", 2, gang=True))
    s.wait("two pods of train Running", lambda: len([
        p for p in s.pods() if p["metadata"]["name"].startswith("train-")
        and p["status"].get("phase") == "Running"]) == 2, 60)
    observe(s, 5)
    s.create(job("plain", 1, gang=False))
    s.create(job("big", 3, gang=True))
    observe(s, 40)
    return s


def watch_closely(s: Scenario, seconds: float, until: Callable[[], bool] = lambda: False
                  ) -> None:
    """Note the pods and PodGroups every 0.3 s while they change, for ``seconds`` or until
    ``until()``."""
    end, last = time.monotonic() + seconds, ""
    while time.monotonic() < end:
        now = f"pods: {describe_pods(s)} | podgroups: {describe_pgs(s)}"
        if now != last:
            s.note(now)
            last = now
        if until():
            return
        time.sleep(0.3)


def scenario_g(api: Api) -> Scenario:
    s = Scenario(api, "g-lost-member", "a scheduled gang of 2 loses members")
    s.create_namespace()
    s.create(podgroup("l", 2))
    s.create(pod("l-0", group="l"))
    s.create(pod("l-1", group="l", annotations={"gangstate.local/fail-after": "20s"}))
    s.wait("both Running", lambda: s.running(["l-0", "l-1"]), 60)
    s.wait("PodGroupInitiallyScheduled=True",
           lambda: (s.pg_condition("l") or {}).get("status") == "True", 30)
    observe(s, 1)
    s.wait("l-1 Failed (KWOK fail-after 20s)", lambda: any(
        p["metadata"]["name"] == "l-1" and p["status"].get("phase") == "Failed"
        for p in s.pods()), 60)
    observe(s, 5)
    s.create(pod("l-2", group="l"))
    s.note("a replacement l-2 created while l-0 still runs (1 live member of minCount 2)")
    watch_closely(s, 15, lambda: s.running(["l-2"]))
    observe(s, 5)
    for name in ("l-0", "l-2"):
        api("DELETE", f"/api/v1/namespaces/{s.ns}/pods/{name}")
        s.note(f"deleted {name}")
    s.wait("l-0 and l-2 gone", lambda: not {"l-0", "l-2"} & {
        p["metadata"]["name"] for p in s.pods()}, 60)
    observe(s, 5)
    s.create(pod("l-3", group="l"))
    s.note("a replacement l-3 created with no live member left")
    observe(s, 20)
    s.snapshot("held")
    return s


def scenario_h(api: Api) -> Scenario:
    s = Scenario(api, "h-preemption", "a high-priority gang preempts a low-priority gang")
    for name, value in (("gang-low", 100), ("gang-high", 1000)):
        try:
            api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": name}, "value": value})
        except RuntimeError:
            pass  # already there
    s.create_namespace()
    s.create(podgroup("low", 2, priority_class="gang-low"))
    for i in range(2):
        s.create(pod(f"low-{i}", group="low", priority_class="gang-low", grace=5))
    s.wait("low Running", lambda: s.running(["low-0", "low-1"]), 60)
    observe(s, 1)
    s.create(podgroup("high", 2, priority_class="gang-high"))
    for i in range(2):
        s.create(pod(f"high-{i}", group="high", priority_class="gang-high"))
    s.wait("both victims DisruptionTarget=True", lambda: sum(
        1 for p in s.pods() if p["metadata"]["name"].startswith("low-") and any(
            c["type"] == "DisruptionTarget" for c in p["status"].get("conditions", []))) == 2, 30)
    s.snapshot("preempting")
    watch_closely(s, 60, lambda: s.running(["high-0", "high-1"]))
    observe(s, 5)
    # a PodGroup whose priority differs from its pods'
    s.create(podgroup("mixed", 1))
    s.create(pod("mixed-0", group="mixed", gpu=0, priority_class="gang-high"))
    observe(s, 15)
    return s


SCENARIOS = {"a": scenario_a, "b": scenario_b, "c": scenario_c, "d": scenario_d,
             "e": scenario_e, "f": scenario_f, "g": scenario_g, "h": scenario_h}


def main(argv: list[str]) -> int:
    global VERBOSITY
    api = Api(Path(argv[1]))
    keys = argv[2:]
    if keys[:1] == ["--v"]:
        VERBOSITY, keys = int(keys[1]), keys[2:]
    for key in keys or list(SCENARIOS):
        s = SCENARIOS[key](api)
        s.save()
        s.delete_namespace()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
