"""``gangstate get gangs``, ``gangstate get fleet``, ``gangstate describe gang``, ``gangstate
explain pod``: the query commands, in the style of kubectl.

Where it sits: the CLI shell of the read side. Each command gets its documents either from a
running worker's HTTP views (``--server URL``, default ``$GANGSTATE_SERVER`` or
``http://127.0.0.1:6066``; see ``streams.worker.web``) or from the offline fold of traces
(``--from TRACE``, repeatable, state as of ``--at``), and prints them as aligned tables and
sections for people or, with ``-o json``, exactly as the worker serves them. The documents come
from ``streams.query.answers``' builders over ``streams.core`` (``summary``, ``findings``,
``why_pod``, ``fleet_summary``); this module only formats.

Fleets (issue 27, docs/query.md "Fleets"): a command reads one cluster's gangs, the one named
by ``--cluster CLUSTER``, else by ``--context CONTEXT`` (a kubeconfig context that
``GANGSTATE_CLUSTER_CONTEXTS`` maps to a cluster id), else ``$GANGSTATE_CLUSTER``, else
``default``; ``get gangs --all-clusters`` lists every cluster's, ``get fleet`` sums each
cluster's.

Exit status: 0 on success; 1 when the gang or pod is unknown, or the worker still cannot be
reached (or still answers 503: not ready) after ``--timeout`` seconds (default 30; the command
says on stderr that it is waiting at the first failed attempt), or answers an error; 2 when a
trace cannot be read, the worker calls the request bad (400) or ``--context`` names a context
``GANGSTATE_CLUSTER_CONTEXTS`` does not map.

Must not: explain or decide anything itself, or import Faust.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence
from urllib.parse import quote

import click

from streams.core.cluster import DEFAULT_CLUSTER, key_of
from streams.core.native import KOORDINATOR, KUBE_SCHEDULER, SCHEDULERS, scheduler_of, split_gang
from streams.kafka.waiting import Unreachable
from streams.cli.options import (REF, cluster_option, name_options, namespace_options,
                                 one_namespace, output_option, qualified, timeout_option)

DEFAULT_SERVER = "http://127.0.0.1:6066"
NONE = "<none>"


class QueryError(Exception):
    """A query that cannot be answered: ``status`` is the exit status (1 unknown gang or pod,
    worker failing; 2 trace unreadable, bad request, unmapped context); ``str(err)`` the
    message for people; ``missing``: the worker answered 404 (no such gang or pod)."""

    def __init__(self, message: str, status: int, missing: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.missing = missing


class _NotYet(Unreachable):
    """One failed attempt to get an answer from the worker (unreachable, or 503: then
    ``answered`` is true)."""

    answered = False


class _Busy(_NotYet):
    """The worker answered 503: no partitions yet, or another worker of its group did not
    answer (the message says which)."""

    answered = True


# -- sources: a worker's views, or the offline fold -------------------------------------------

def _unknown_host(err: BaseException) -> str | None:
    """The host of a request that failed because its name does not exist (``getaddrinfo``'s
    ``EAI_NONAME``, which urllib3 reports as ``NameResolutionError``), else ``None``; a
    temporary resolver failure (``EAI_AGAIN``) is no answer and stays retried."""
    import socket
    from urllib.parse import urlsplit

    import urllib3.exceptions

    reason = getattr(err.args[0], "reason", None) if err.args else None
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        cause = reason.__cause__
        if isinstance(cause, socket.gaierror) and cause.errno == socket.EAI_NONAME:
            url = getattr(getattr(err, "request", None), "url", None) or ""
            return urlsplit(url).hostname or "?"
    return None


class ServerSource:
    """Documents from a running worker's HTTP views at ``base`` (``http://host:port``).

    A worker that cannot be reached, or answers 503 (no partitions yet), is asked again with
    backoff for up to ``wait`` seconds (``streams.kafka.waiting.retry``, saying so on stderr
    at the first failure), then ``Failure`` (1). Every method raises ``QueryError`` (1 on a
    404 or an error answer, 2 on a 400); one request may take ``timeout`` seconds.
    """

    def __init__(self, base: str, timeout: float = 10.0, wait: float = 30.0,
                 where: str = "--server") -> None:
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.wait = wait
        self.where = where

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        import time

        from streams.kafka.waiting import retry

        from streams.kafka.waiting import Failure

        started = time.monotonic()
        deadline = started + self.wait
        last: list[_NotYet] = []

        def attempt() -> Any:
            try:
                return self._get_once(path, params, deadline)
            except _NotYet as err:
                last[:] = [err]
                raise

        try:
            return retry(attempt, who=f"gangstate {self.command}",
                         waiting=f"the gangstate worker at {self.base} ({self.where})",
                         deadline=deadline, transient=(_NotYet,),
                         say=lambda line: print(line, file=sys.stderr, flush=True),
                         give_up="start one with `gangstate worker --http-port PORT`, or set "
                                 "--server / GANGSTATE_SERVER")
        except Failure as failed:
            if not (last and last[0].answered):
                raise
            # it is up: what failed is behind it (its partitions, or another worker)
            raise Failure(f"the gangstate worker at {self.base} ({self.where.split(';')[0]}) "
                          f"could not answer in {time.monotonic() - started:.0f} s "
                          f"({last[0]}); ask again once its group is settled (its /readyz "
                          f"says why not)", failed.status) from None

    command = "get"
    """The command's name, for the waiting line (set by ``Source.open``)."""

    def _get_once(self, path: str, params: dict[str, str] | None, deadline: float) -> Any:
        import time

        import requests

        url = self.base + path
        left = max(1.0, min(self.timeout, deadline - time.monotonic()))
        try:
            resp = requests.get(url, params={k: v for k, v in (params or {}).items() if v},
                                timeout=(min(3.0, left), left))
        except requests.RequestException as err:
            host = _unknown_host(err)
            if host is not None:  # a name no resolver knows: no retry mends it
                raise QueryError(f"{self.where.split(';')[0]}: cannot resolve host {host!r} of "
                                 f"{self.base} (no such name); give the worker's address, "
                                 f"e.g. {DEFAULT_SERVER}", 1) from None
            raise _NotYet(type(err).__name__) from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if resp.status_code == 503:
            raise _Busy(f"503: {error or resp.text[:200].strip()}")
        if resp.status_code == 404 and error:
            raise QueryError(error, 1, missing=True)
        if resp.status_code != 200 or body is None:
            raise QueryError(f"the gangstate worker at {self.base} answered {resp.status_code} "
                             f"for {path}: {error or resp.text[:200]}",
                             2 if resp.status_code == 400 else 1)
        return body

    def gangs(self, namespace: str | None, phase: str | None,
              scheduler: str | None = None,
              cluster: str | None = DEFAULT_CLUSTER) -> list[dict[str, Any]]:
        """``GET /gangs?cluster=C`` (``cluster`` ``None``: ``?all_clusters=1``): rows of
        ``streams.query.answers.gang_row``."""
        where = {"all_clusters": "1"} if cluster is None else {"cluster": cluster}
        return self._get("/gangs", {"namespace": namespace or "", "phase": phase or "",
                                    "scheduler": scheduler or "", **where})["gangs"]

    def gang(self, gang: str, scheduler: str | None = None,
             cluster: str = DEFAULT_CLUSTER) -> dict[str, Any]:
        """``GET /gangs/{ns}/{name}?cluster=C``: ``streams.query.answers.gang_detail`` of the
        gang ``gang`` names in ``cluster`` (``_resolved``: asked for each scheduler's id of
        that name)."""
        def one(gang_id: str) -> dict[str, Any] | None:
            ns, name = _split(gang_id)
            try:
                doc: dict[str, Any] = self._get(
                    f"/gangs/{quote(ns, safe='')}/{quote(name, safe='')}", {"cluster": cluster})
            except QueryError as err:
                if err.missing:
                    return None
                raise
            return doc
        return _resolved(gang, scheduler, one, cluster)

    def why(self, pod: str, gang: str | None, cluster: str = DEFAULT_CLUSTER) -> dict[str, Any]:
        """``GET /pods/{ns}/{name}/why?gang=G&cluster=C``: ``streams.core.explain.why_pod``."""
        ns, name = _split(pod)
        return self._get(f"/pods/{quote(ns, safe='')}/{quote(name, safe='')}/why",
                         {"gang": gang or "", "cluster": cluster})

    def fleet(self) -> list[dict[str, Any]]:
        """``GET /fleet``: rows of ``streams.query.answers.fleet_summary``."""
        rows: list[dict[str, Any]] = self._get("/fleet")["clusters"]
        return rows


class TraceSource:
    """Documents from the offline fold of ``traces`` (merged by ``observed_at``, as the worker
    sees them) as of ``at`` (microseconds of event time): records after ``at`` are left out and
    the fold ends with a tick at ``at``. Raises ``QueryError`` (2) when a trace is unreadable;
    malformed lines are reported on stderr and skipped, and records far ahead of the rest
    (``streams.wire.traces.far_ahead``) set aside and reported, as ``gangstate fold`` does.
    The gangs are read at ``at`` (``streams.core.state.as_of``), or with ``read_at_end`` at
    their own latest record."""

    def __init__(self, traces: Sequence[str], at: int, read_at_end: bool = False) -> None:
        from streams.kafka.partitions import partition_of
        from streams.settings import environment, fold_settings
        from streams.wire.traces import fold_lines

        lines = _lines_until(list(traces), at)
        result = fold_lines(((n, raw) for _, n, raw in lines), at, fold_settings(),
                            max_skew_micros=int(environment().max_skew_seconds * 1_000_000),
                            partition_of=partition_of)
        for number, error in result.errors:
            print(f"line {number}: skipped malformed record: {error}", file=sys.stderr)
        for number, _observed_at, reason in result.set_aside:
            print(f"line {number}: {reason}", file=sys.stderr)
        self.states = result.states
        # what the gangs are read at: ``at`` (the fold's clock, ticked there), or with
        # ``read_at_end`` (no --at given) each gang's own latest record: a recording's Events
        # stop where it ends, not because the scheduler went quiet
        self.clock = None if read_at_end else result.clock

    def gangs(self, namespace: str | None, phase: str | None,
              scheduler: str | None = None,
              cluster: str | None = DEFAULT_CLUSTER) -> list[dict[str, Any]]:
        """``streams.query.answers.gang_rows`` of the folded gangs of ``cluster`` (``None``:
        every cluster); a bad phase or scheduler is ``QueryError`` 2."""
        from streams.query.answers import gang_rows

        try:
            return gang_rows(self.states.values(), namespace, phase, scheduler, cluster)
        except ValueError as err:
            raise QueryError(str(err), 2) from None

    def gang(self, gang: str, scheduler: str | None = None,
             cluster: str = DEFAULT_CLUSTER) -> dict[str, Any]:
        """``streams.query.answers.gang_detail`` of the gang ``gang`` names in ``cluster``
        (``_resolved``); an unknown gang is ``QueryError`` 1."""
        from streams.query.answers import gang_detail

        def one(gang_id: str) -> dict[str, Any] | None:
            state = self.states.get(key_of(cluster, gang_id))
            return None if state is None else gang_detail(state, self.clock)
        return _resolved(gang, scheduler, one, cluster)

    def why(self, pod: str, gang: str | None, cluster: str = DEFAULT_CLUSTER) -> dict[str, Any]:
        """``streams.query.answers.explain_pod`` within ``cluster``; an unknown gang or pod is
        ``QueryError`` 1."""
        from streams.query.answers import NotFound, explain_pod

        try:
            return explain_pod(self.states, pod, gang, lambda _key: self.clock, cluster)
        except NotFound as err:
            raise QueryError(str(err), 1) from None

    def fleet(self) -> list[dict[str, Any]]:
        """``streams.query.answers.fleet_summary`` of the folded gangs."""
        from streams.query.answers import fleet_summary

        return fleet_summary(self.states.items(), lambda _key: self.clock)


def trace_spec(spec: str) -> tuple[Path, str]:
    """``(path, cluster)`` of a ``--from`` value: ``PATH``, or ``CLUSTER=PATH`` for a trace
    or dump of one cluster of a fleet (its records without a ``cluster`` are that cluster's,
    ``producers.watch.dump.trace_lines``); a file whose own name has ``=`` is read as given.
    Raises ``QueryError`` 2 for a ``CLUSTER`` that is no cluster id."""
    from streams.core.cluster import cluster_problem

    cluster, sep, path = spec.partition("=")
    if not sep or Path(spec).exists():
        return Path(spec), DEFAULT_CLUSTER
    problem = cluster_problem(cluster)
    if problem is not None:
        raise QueryError(f"--from {spec}: {problem}", 2)
    return Path(path), cluster


def _lines_until(specs: list[str], at: int) -> list[tuple[str, int, bytes]]:
    from producers.replay import merged_by_time

    from streams.core.timefmt import parse_time

    from producers.watch.dump import DumpError, trace_lines

    given = [trace_spec(spec) for spec in specs]
    clusters = iter([cluster for _, cluster in given])  # file_lines reads each path once, in order
    try:
        lines = merged_by_time([path for path, _ in given],
                               lambda path: trace_lines(path, next(clusters)))
    except OSError as err:
        raise QueryError(f"cannot read {err.filename}: {err.strerror}", 2) from None
    except DumpError as err:
        raise QueryError(str(err), 2) from None

    def due(raw: bytes) -> bool:
        try:
            return parse_time(json.loads(raw)["observed_at"]) <= at
        except Exception:
            return True  # malformed: the decoder reports it with its line number
    return [line for line in lines if due(line[2])]


def _resolved(gang: str, scheduler: str | None,
              one: Any, cluster: str = DEFAULT_CLUSTER) -> dict[str, Any]:
    """The one document of the gang ``gang`` names in ``cluster``: ``one(gang id)`` (``None``
    when unknown; the id within the cluster) for each id it may mean
    (``streams.query.answers.gang_candidates``: Koordinator's and the native one, unless
    ``scheduler`` says which). ``QueryError`` 1 when none is known or both are (then
    ``--scheduler`` must say which), 2 for an unknown scheduler."""
    from streams.query.answers import ambiguous, gang_candidates, in_cluster

    try:
        candidates = gang_candidates(gang, scheduler)
    except ValueError as err:
        raise QueryError(str(err), 2) from None
    found = [doc for doc in (one(g) for g in candidates) if doc is not None]
    if not found:
        raise QueryError(f"gang {gang} not found{in_cluster(cluster)}", 1)
    if len(found) > 1:
        raise QueryError(ambiguous(gang, [doc["gang"] for doc in found]), 1)
    return found[0]


def _split(name: str) -> tuple[str, str]:
    ns, sep, rest = name.partition("/")
    if not sep or not ns or not rest or "/" in rest:
        raise QueryError(f"{name!r} is not NAMESPACE/NAME", 2)
    return ns, rest


# -- formatting for people ---------------------------------------------------------------------

def _cell(value: Any) -> str:
    return NONE if value is None or value == "" else str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> str:
    """Columns aligned on the widest cell, separated by three spaces (kubectl's layout); ``None``
    and empty cells print as ``<none>``. Returns the lines joined, with a final newline."""
    cells = [list(headers)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [indent + "   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


NO_REPRESENTATIVE = "<not known without the scheduler shim (koord-scheduler keeps it in memory)>"
"""What ``describe gang`` and ``explain pod`` show for a gang no scheduler shim reports:
koord-scheduler v1.8.0 keeps its representative in memory only (its gang group's record, K
``core/gang.go:572-586`` ``RecordIfNoRepresentatives``; no Event, no field of the pod says
which), so without the shim gangstate does not know it."""

NO_REPRESENTATIVE_NOW = "<none now (the scheduler shim reports none for this gang)>"
"""What ``describe gang`` and ``explain pod`` show for a gang a scheduler shim reports but
whose group has no representative now (not past Coscheduling's PreEnqueue checks yet, or its
representative bound or gone: K ``core/gang.go:489-507`` ``DeleteIfRepresentative``)."""


NO_REPRESENTATIVE_NATIVE = "<none: kube-scheduler's GangScheduling has no representative>"
"""What ``describe gang`` and ``explain pod`` show for a native gang: kube-scheduler v1.37.2
queues every pod of a PodGroup (its PreEnqueue counts them all, NG4)."""


def _representative(value: str | None, scheduler: str = KOORDINATOR,
                    shim: bool | None = None) -> str:
    """The representative as ``describe``/``explain`` write it; ``shim``: whether a scheduler
    shim reports the gang (``None``: not said, as in documents of older workers)."""
    if value is not None:
        return value
    if scheduler == KUBE_SCHEDULER:
        return NO_REPRESENTATIVE_NATIVE
    return NO_REPRESENTATIVE_NOW if shim else NO_REPRESENTATIVE


def _fields(pairs: Sequence[tuple[str, Any]], indent: str = "") -> str:
    width = max(len(k) for k, _ in pairs) + 2
    return "".join(f"{indent}{(k + ':').ljust(width)}{_cell(v)}\n" for k, v in pairs)


def format_gangs(rows: list[dict[str, Any]], clusters: bool = False) -> str:
    """``get gangs``: one line per gang, ``SCHEDULER`` (``koord-scheduler`` or
    ``kube-scheduler``), ``MEMBERS`` as ``members/min_member`` (minMember, or a native gang's
    minCount); with ``clusters`` (``--all-clusters``) a leading ``CLUSTER`` column."""
    return table((*(("CLUSTER",) if clusters else ()), "NAMESPACE", "NAME", "SCHEDULER",
                  "PHASE", "MEMBERS", "BOUND", "WAITING", "REPRESENTATIVE"),
                 ([*([r.get("cluster", DEFAULT_CLUSTER)] if clusters else []),
                   r["namespace"], r["name"], r.get("scheduler"), r["phase"],
                   f"{r['members']}/{'?' if r['min_member'] is None else r['min_member']}",
                   r["bound"], r["waiting"], r["representative"]] for r in rows))


FLEET_HEADERS = ("CLUSTER", "GANGS", "NOTINITIALIZED", "GATHERING", "READY", "SCHEDULING",
                 "SCHEDULED", "DEGRADED", "OTHER", "WARNINGS", "STORM", "LAST TICK")


def format_fleet(rows: list[dict[str, Any]]) -> str:
    """``get fleet``: one line per cluster (``streams.query.answers.fleet_summary``): its
    gangs, their count by phase (``DEGRADED``: scheduled, then short of minMember after
    losing members; ``OTHER``: ``Finished``), ``WARNINGS`` the gangs with an open
    Warning finding, ``STORM`` the scheduler's FailedScheduling Events per minute summed over
    the cluster's gangs, ``LAST TICK`` how far its watch producer's latest tick is behind the
    latest of any cluster (``0s behind``; ``<none>`` for a cluster whose producer was not heard:
    a trace, or no tick yet)."""
    def last_tick(r: dict[str, Any]) -> str | None:
        behind = r.get("tick_behind_seconds")
        return None if behind is None else f"{behind}s behind"

    return table(FLEET_HEADERS,
                 ([r["cluster"], r["gangs"], r["phases"]["NotInitialized"],
                   r["phases"]["Gathering"], r["phases"]["Ready"], r["phases"]["Scheduling"],
                   r["phases"]["Scheduled"], r["phases"]["Degraded"], r["phases"]["other"],
                   r["warning_gangs"],
                   r["failed_events_per_minute"], last_tick(r)] for r in rows))


def _cluster_field(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """``Cluster: eu-1`` for a document of a gang outside the ``default`` cluster (it names
    its ``cluster``); nothing in ``default``, whose output stays as before fleets."""
    return [("Cluster", doc["cluster"])] if doc.get("cluster") else []


def format_gang(doc: dict[str, Any]) -> str:
    """``describe gang``: the spec and counts, the pods, the open findings, the history. A
    native gang (kube-scheduler's) shows its spec in kube-scheduler's terms: its PodGroup (or
    CompositePodGroup) and minCount (minGroupCount), the fixed Permit wait; no gang group,
    total number, mode, representative, epoch or storm (Koordinator's)."""
    ns, name, scheduler = split_gang(doc["gang"])
    waiting = doc["waiting_seconds"]
    deleted = [("Deleted", doc["deleted"])] if doc.get("deleted") else []
    native = scheduler == KUBE_SCHEDULER
    if native:
        composite = doc["gang"].partition("/")[2].startswith("composite:")
        spec: list[tuple[str, Any]] = [
            ("CompositePodGroup" if composite else "PodGroup", doc["podgroup"]),
            ("Min group count" if composite else "Min count", doc["min_member"]),
            ("Permit wait", None if waiting is None else f"{waiting}s (fixed)")]
        if doc["gang_group"] != doc["gang"]:
            spec.append(("Composite", doc["gang_group"]))
        members = (f"{doc['members']} child groups with their minCount pods" if composite else
                   f"{doc['members']} ({doc['bound']} bound)")
        extra: list[tuple[str, Any]] = []
    else:
        spec = [("Gang group", doc["gang_group"]), ("Spec from", doc["spec_source"]),
                ("PodGroup", doc["podgroup"]), ("Min member", doc["min_member"]),
                ("Total number", doc["total_number"]), ("Mode", doc["mode"]),
                ("Waiting time", None if waiting is None else f"{waiting}s")]
        members = (f"{doc['members']} ({doc['bound']} bound, {doc['waiting']} waiting at "
                   f"Permit)")
        extra = [("Representative", _representative(doc["representative"], scheduler,
                                                    doc.get("shim_reports"))),
                 ("Epoch", doc["epoch"])]
    storm = [] if native else [
        ("Storm", f"{doc.get('failed_attempts_per_minute', 0)} FailedScheduling "
                  f"Events per minute (the last 60 s of event time)")]
    out = _fields([
        *_cluster_field(doc),
        ("Name", name), ("Namespace", ns), ("Scheduler", scheduler), ("Phase", doc["phase"]),
        *deleted, *spec, ("Members", members), *extra,
        ("Last cycle", doc["last_cycle"]),
        ("Failing", _failing(doc.get("failing"), "failed cycles" if native else "rounds")),
        ("Preemption", _preemption(doc.get("preemption"))),
        *storm,
    ])
    out += "Pods:\n"
    pods = doc["pods"]
    out += table(("NAME", "PHASE", "NODE", "CYCLE", "STAGE", "STATUS", "REASON"),
                 ([pod.split("/", 1)[1],
                   f"{p['phase']} (terminating)" if p.get("terminating") else p["phase"],
                   p["node"], p["cycle"], p["stage"],
                   p["status"], p["reason"]] for pod, p in pods.items()),
                 indent="  ") if pods else "  <none>\n"
    out += "Findings:\n"
    found = doc["findings"]
    out += table(("TYPE", "REASON", "SINCE", "MESSAGE"),
                 ([f["type"], f["reason"], f.get("since"), f["message"]] for f in found),
                 indent="  ") if found else "  <none>\n"
    out += "History:\n"
    hist = doc["history"]
    out += table(("AT", "CHANGE", "CAUSE"),
                 ([h["at"], h["change"], h["cause"]] for h in hist),
                 indent="  ") if hist else "  <none>\n"
    return out


def _failing(failing: dict[str, Any] | None, unit: str = "rounds") -> str | None:
    """The gang's last failure episode in one line: ``since 2026-12-01T03:41:27.291286Z, 16
    rounds, last failure 2026-12-01T03:41:28.355863Z`` (``unit``: ``rounds`` of Koordinator,
    ``failed cycles`` of kube-scheduler's pod-group cycle); ``None`` without one."""
    if failing is None:
        return None
    n = failing["rounds"]
    return f"since {failing['since']}, {n} {unit if n != 1 else unit[:-1]}, last failure " \
           f"{failing['last_failed_at']}"


def _preemption(pre: dict[str, Any] | None) -> str | None:
    """The pods preempted for the gang and its members' nominated nodes in one line, e.g.
    ``low/v-0 on node-a for ns/g-0 since 2026-12-01T10:00:01.000000Z, terminating (grace
    period 30s); nominated: g-0 on node-a``; ``None`` when the gang knows of no preemption."""
    if not pre:
        return None
    parts = []
    for v in pre["victims"]:
        state = "terminating" if v["gone_at"] is None else f"gone at {v['gone_at']}"
        grace = "" if v["grace_seconds"] is None else f" (grace period {v['grace_seconds']}s)"
        parts.append(f"{v['pod']} on {v['node']} for {v['for']} since {v['preempted_at']}, "
                     f"{state}{grace}")
    nominated = ", ".join(f"{m} on {n}" for m, n in sorted(pre["nominated"].items()))
    text = "; ".join(parts) or "no victim seen"
    if pre.get("clause"):
        text += f"; the scheduler's latest word: {pre['clause']}"
    return text + (f"; nominated: {nominated}" if nominated else "")


def _last_cycle(cycle: dict[str, Any] | None) -> str | None:
    """``502 Filter Unschedulable (Insufficient cpu)``; an outcome known from a scheduler Event
    has no cycle number: ``Filter Unschedulable (...), cycle number unknown``."""
    if cycle is None:
        return None
    text = f"{cycle['stage']} {cycle['status']}" + (f" ({cycle['reason']})"
                                                    if cycle["reason"] else "")
    if cycle["cycle"] is None:
        return f"{text}, cycle number unknown"
    return f"{cycle['cycle']} {text}"


def format_why(doc: dict[str, Any]) -> str:
    """``explain pod``: the pod, its gang, where it is held (and by what, when ``held_by`` is
    known: ``PreEnqueue (schedulingGates of ns/name)``), why, and what would unblock it."""
    g = doc["gang_summary"]
    min_member = "?" if g["min_member"] is None else g["min_member"]
    cycle = doc["last_cycle"]
    scheduler = scheduler_of(doc["gang"])
    least = "minCount" if scheduler == KUBE_SCHEDULER else "minMember"
    out = _fields([
        *_cluster_field(doc),
        ("Pod", doc["pod"]), ("Phase", doc["phase"]), ("Node", doc["node"]),
        ("Gang", f"{doc['gang']} ({doc['gang_phase']}: {g['members']} of {least} "
                 f"{min_member} pods, {g['bound']} bound, {g['waiting']} waiting at Permit)"),
        ("Representative", _representative(g["representative"], scheduler,
                                           g.get("shim_reports"))),
        ("Last cycle", _last_cycle(cycle)),
        ("Held at", doc["held_at"] if not doc.get("held_by")
         else f"{doc['held_at']} ({doc['held_by']})"),
    ])
    out += "\nWhy it is pending:\n"
    if doc["node"] is not None:
        out += f"  it is not: it is bound to node {doc['node']}\n"
    elif doc["held_at"] is None:
        out += "  no gang condition known to gangstate holds it\n"
    out += "".join(f"  {r['reason']}: {r['message']}\n" for r in doc["reasons"])
    out += "\nWhat would unblock it:\n"
    out += "".join(f"  - {u}\n" for u in doc["unblock"] if u) or "  <nothing gangstate can name>\n"
    return out


# -- commands ----------------------------------------------------------------------------------

def format_gangs_wide(rows: list[dict[str, Any]], clusters: bool = False) -> str:
    """``get gangs -o wide``: minMember and the unbound members in columns of their own; with
    ``clusters`` a leading ``CLUSTER`` column."""
    return table((*(("CLUSTER",) if clusters else ()), "NAMESPACE", "NAME", "SCHEDULER",
                  "PHASE", "MEMBERS", "MIN MEMBER", "BOUND", "UNBOUND", "WAITING",
                  "REPRESENTATIVE"),
                 ([*([r.get("cluster", DEFAULT_CLUSTER)] if clusters else []),
                   r["namespace"], r["name"], r.get("scheduler"), r["phase"], r["members"],
                   r["min_member"],
                   r["bound"], r["members"] - r["bound"], r["waiting"], r["representative"]]
                  for r in rows))


def _emit(output: str, doc: Any, text: str) -> None:
    if output == "json":
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif output == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(text)


def _run(command: str, source: Source, fn: Any) -> int:
    try:
        fn(source.open(command))
    except QueryError as err:
        return _failed(command, err)
    return 0


def _failed(command: str, err: QueryError) -> int:
    print(f"gangstate {command}: {err}", file=sys.stderr)
    return err.status


def chosen_cluster(cluster: str | None, context: str | None,
                   all_clusters: bool = False) -> str | None:
    """The cluster a query command reads: ``cluster`` (``--cluster``), else the cluster of
    kubeconfig context ``context`` (``--context``, mapped by ``GANGSTATE_CLUSTER_CONTEXTS``),
    else ``$GANGSTATE_CLUSTER``, else ``default``; ``None`` (every cluster) with
    ``all_clusters``. Two of the three given is a usage error (``click.UsageError``); a
    context the mapping does not name is ``QueryError`` 2 (one line); a bad mapping or
    ``GANGSTATE_CLUSTER`` a ``SettingsError`` (one line)."""
    from streams.settings import cluster_contexts, environment

    given = [flag for flag, value in (("--cluster", cluster), ("--context", context),
                                      ("--all-clusters", all_clusters)) if value]
    if len(given) > 1:
        raise click.UsageError(f"{' and '.join(given)} exclude each other")
    if all_clusters:
        return None
    if cluster is not None:
        return cluster
    if context is not None:
        contexts = cluster_contexts()
        if context not in contexts:
            known = (f"it maps {', '.join(sorted(contexts))}" if contexts
                     else "GANGSTATE_CLUSTER_CONTEXTS is not set")
            raise QueryError(f"--context {context}: no cluster for this kubeconfig context "
                             f"({known}); add {context}=CLUSTER to GANGSTATE_CLUSTER_CONTEXTS, "
                             f"or give --cluster CLUSTER", 2)
        return contexts[context]
    return environment().cluster


def cluster_options(all_clusters: bool = False) -> Any:
    """``--cluster CLUSTER`` and ``--context CONTEXT`` (and with ``all_clusters``
    ``--all-clusters``): which cluster's gangs a query command reads (``chosen_cluster``); the
    command receives ``cluster``, ``context`` (and ``all_clusters``)."""
    def decorate(f: Any) -> Any:
        if all_clusters:
            f = click.option("--all-clusters", is_flag=True,
                             help="every cluster's gangs, with a leading CLUSTER column "
                                  "(sorted by cluster, namespace, name); excludes --cluster "
                                  "and --context")(f)
        f = click.option("--context", default=None, metavar="CONTEXT",
                         help="read the cluster of this kubeconfig context, as "
                              "$GANGSTATE_CLUSTER_CONTEXTS maps it (CONTEXT=CLUSTER[,...], "
                              "e.g. kind-eu=eu-1,prod-us=us-2); no kubeconfig is read; "
                              "excludes --cluster")(f)
        return cluster_option("read this cluster's gangs: a cluster id such as eu-1 or "
                              "gpu-h100-a")(f)
    return decorate


def server_url_problem(url: str) -> str | None:
    """What is wrong with a worker's address (``--server``, ``GANGSTATE_SERVER``) as one line,
    ``None`` for a good one: ``http://`` or ``https://``, a host, an optional port (1-65535),
    no path but ``/``, no query; e.g. ``notaurl`` -> ``'notaurl' is not a worker's address:
    give http://HOST:PORT (e.g. http://127.0.0.1:6066)``."""
    from urllib.parse import urlsplit

    hint = f"{url!r} is not a worker's address: give http://HOST:PORT (e.g. {DEFAULT_SERVER})"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is no number or out of range
    except ValueError:
        return hint
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment or port == 0:
        return hint
    if parts.path not in ("", "/"):  # the views' paths are the command's to add
        return (f"{url!r} is not a worker's address: give http://HOST:PORT without a path "
                f"(e.g. {DEFAULT_SERVER}; the command adds /gangs, /fleet, ...)")
    return None


class Source:
    """Where the answers come from: ``--from`` traces (as of ``--at``) or ``--server``."""

    def __init__(self, server: str | None, traces: tuple[str, ...], at: str | None,
                 timeout: float = 30.0) -> None:
        self.server, self.traces, self.at, self.timeout = server, traces, at, timeout

    def open(self, command: str = "get") -> ServerSource | TraceSource:
        if self.traces:
            from streams.cli.options import _at

            return TraceSource(list(self.traces), _at(self.at), read_at_end=self.at is None)
        if self.at is not None:  # a worker answers as of its partitions' clocks, not --at
            raise QueryError("--at needs --from TRACE: a worker answers as of its latest "
                             "records (its partitions' clocks)", 2)
        from streams.settings import environment

        given = environment().server
        where = ("--server" if self.server else "GANGSTATE_SERVER" if given
                 else "the default; set --server or GANGSTATE_SERVER")
        base = self.server or given or DEFAULT_SERVER
        problem = server_url_problem(base)
        if problem is not None:  # no 30 s of retries for what no retry can mend
            raise QueryError(f"{where.split(';')[0]}: {problem}", 2)
        source = ServerSource(base, wait=self.timeout, where=where)
        source.command = command
        return source


def scheduler_option(f: Any) -> Any:
    """``--scheduler``: ``koord-scheduler`` (Koordinator's Coscheduling) or ``kube-scheduler``
    (Kubernetes' own GangScheduling); default: either."""
    return click.option("--scheduler", type=click.Choice(SCHEDULERS), default=None,
                        help="only gangs of this scheduler: koord-scheduler (Koordinator's "
                             "Coscheduling) or kube-scheduler (Kubernetes' GangScheduling, "
                             "PodGroups of scheduling.k8s.io); default: both")(f)


def source_options(f: Any) -> Any:
    """``--server``, ``--from TRACE`` (repeatable), ``--at`` and ``--timeout``: which answers,
    and how long to wait for the worker."""
    f = click.option("--at", default=None,
                     help="with --from: the state as of this RFC 3339 time (records after it "
                          "are left out; default: now, the gangs then read at their latest "
                          "record)")(f)
    f = click.option("--from", "traces", multiple=True, metavar="[CLUSTER=]TRACE",
                     help="answer from the offline fold of this trace instead of a worker "
                          "(repeatable: traces are merged by observed_at; CLUSTER=TRACE makes "
                          "its records that name no cluster that cluster's, e.g. "
                          "--from eu-1=eu.json --from us-2=us.json); a `kubectl get "
                          "nodes,pods,podgroups,events -o json` dump (gzipped or not) works "
                          "too (on a cluster with Kubernetes' own gangs, name "
                          "podgroups.scheduling.k8s.io, compositepodgroups.scheduling.k8s.io "
                          "and workloads.scheduling.k8s.io: docs/query.md)")(f)
    f = timeout_option("the worker (unreachable, or 503: not ready yet)")(f)
    f = click.option("--server", default=None,
                     help=f"URL of a worker's views (`gangstate worker --http-port PORT`); "
                          f"default $GANGSTATE_SERVER or {DEFAULT_SERVER}")(f)
    return f


@click.group(short_help="list gangs, or the fleet's clusters (kubectl get style)")
def get() -> None:
    """List gangs with their phase and counts, or the clusters of the fleet."""


@get.command("gangs", short_help="gangs, sorted by id")
@namespace_options
@click.option("--phase", default=None,
              help="only gangs in this phase (NotInitialized, Gathering, Ready, Scheduling, "
                   "Scheduled, Degraded, Finished, Deleted)")
@scheduler_option
@cluster_options(all_clusters=True)
@source_options
@output_option("text", "json", "yaml", "wide", "name")
def get_gangs(namespace: str | None, all_namespaces: bool, phase: str | None,
              scheduler: str | None, cluster: str | None, context: str | None,
              all_clusters: bool, server: str | None, traces: tuple[str, ...],
              at: str | None, output: str, timeout: float) -> int:
    """One line per gang: its scheduler (koord-scheduler or kube-scheduler), phase,
    members/minMember (a native PodGroup's minCount), bound, waiting at Permit, representative.
    Deleted gangs are left out unless --phase Deleted asks for them.

    The gangs of one cluster: --cluster CLUSTER (a cluster id, a DNS-1123 label such as eu-1),
    else the cluster of --context CONTEXT, else $GANGSTATE_CLUSTER, else 'default';
    --all-clusters lists every cluster's, CLUSTER first (-o name then prints each gang's key,
    gang/eu-1:NAMESPACE/NAME, the bare id in 'default')."""
    namespace = one_namespace(namespace, all_namespaces)
    try:
        chosen = chosen_cluster(cluster, context, all_clusters)
    except QueryError as err:
        return _failed("get", err)

    def run(src: ServerSource | TraceSource) -> None:
        rows = src.gangs(namespace, phase, scheduler, chosen)
        if not rows and output not in ("json", "yaml"):
            where = f" in namespace {namespace}" if namespace else ""
            others = [] if chosen is None else \
                [r for r in src.fleet() if r["cluster"] != chosen and r["gangs"]]
            if others:  # a fleet: say where the gangs are
                print(f"No gangs found{where} in cluster {chosen} (other clusters have "
                      f"{sum(r['gangs'] for r in others)} gangs in all: "
                      f"{', '.join(r['cluster'] for r in others)}; --cluster CLUSTER or "
                      f"--all-clusters shows them).", file=sys.stderr)
            else:
                from streams.query.answers import in_cluster

                print(f"No gangs found{where}{in_cluster(chosen)}.", file=sys.stderr)
            return
        if output == "name":
            sys.stdout.write("".join(
                f"gang/{key_of(r['cluster'], r['gang']) if all_clusters else r['gang']}\n"
                for r in rows))
            return
        text = (format_gangs_wide(rows, all_clusters) if output == "wide"
                else format_gangs(rows, all_clusters))
        _emit(output, {"gangs": rows}, text)
    return _run("get", Source(server, traces, at, timeout), run)


get.add_command(get_gangs, "gang")


@get.command("fleet", short_help="one line per cluster: gangs by phase, warnings, storm")
@source_options
@output_option("text", "json", "yaml")
def get_fleet(server: str | None, traces: tuple[str, ...], at: str | None, output: str,
              timeout: float) -> int:
    """The fleet at a glance: one line per cluster (a cluster id, a DNS-1123 label such as
    eu-1; 'default' for records that name none), sorted by cluster. GANGS counts its gangs
    (deleted ones left out), then by phase: NOTINITIALIZED, GATHERING, READY, SCHEDULING,
    SCHEDULED, OTHER (Finished). WARNINGS: gangs with an open Warning finding (what describe
    gang lists; -o json also gives the findings' count). STORM: the scheduler's
    FailedScheduling Events per minute (the last 60 s of event time), summed over the
    cluster's gangs. From a worker: the gangs that worker owns (GET /fleet)."""
    def run(src: ServerSource | TraceSource) -> None:
        rows = src.fleet()
        if not rows and output not in ("json", "yaml"):
            print("No gangs found.", file=sys.stderr)
            return
        _emit(output, {"clusters": rows}, format_fleet(rows))
    return _run("get", Source(server, traces, at, timeout), run)


@click.group(short_help="describe a gang (kubectl describe style)")
def describe() -> None:
    """Show one gang: spec, counts, pods, open findings, history."""


@describe.command("gang", short_help="one gang")
@name_options("gang")
@scheduler_option
@cluster_options()
@source_options
@output_option("text", "json", "yaml")
def describe_gang(name: str, namespace: str | None, scheduler: str | None, cluster: str | None,
                  context: str | None, server: str | None, traces: tuple[str, ...],
                  at: str | None, output: str, timeout: float) -> int:
    """Show gang NAMESPACE/NAME (or NAME with -n NAMESPACE): spec, counts, pods, open findings,
    history. NAME is the gang's (its PodGroup's) name under either scheduler; when both have a
    gang of that name, --scheduler says which. The gang is looked for in one cluster:
    --cluster CLUSTER (a cluster id, a DNS-1123 label such as eu-1), else the cluster of
    --context CONTEXT, else $GANGSTATE_CLUSTER, else 'default'. Exit 1 when the gang is
    unknown there."""
    gang = qualified(name, namespace, "gang")
    try:
        chosen = chosen_cluster(cluster, context)
    except QueryError as err:
        return _failed("describe", err)
    assert chosen is not None

    def run(src: ServerSource | TraceSource) -> None:
        doc = src.gang(gang, scheduler, chosen)
        _emit(output, doc, format_gang(doc))
    return _run("describe", Source(server, traces, at, timeout), run)


describe.add_command(describe_gang, "gangs")


@click.group(short_help="explain why a pod is pending")
def explain() -> None:
    """Say why a gang pod is pending and what would unblock it."""


@explain.command("pod", short_help="one pod")
@name_options("pod")
@click.option("--gang", type=REF, default=None, metavar="NAMESPACE/NAME",
              help="the pod's gang (default: the gang whose members include the pod)")
@cluster_options()
@source_options
@output_option("text", "json", "yaml")
def explain_pod(name: str, namespace: str | None, gang: str | None, cluster: str | None,
                context: str | None, server: str | None, traces: tuple[str, ...],
                at: str | None, output: str, timeout: float) -> int:
    """Why pod NAMESPACE/NAME (or NAME with -n NAMESPACE) is pending (held at PreEnqueue,
    waiting at Permit, failed its cycle) and what would unblock it. The pod is one of a
    cluster's: --cluster CLUSTER (a cluster id, a DNS-1123 label such as eu-1), else the
    cluster of --context CONTEXT, else $GANGSTATE_CLUSTER, else 'default'. Exit 1 when the pod
    is not a live member of a known gang of that cluster."""
    pod = qualified(name, namespace, "pod")
    try:
        chosen = chosen_cluster(cluster, context)
    except QueryError as err:
        return _failed("explain", err)
    assert chosen is not None

    def run(src: ServerSource | TraceSource) -> None:
        doc = src.why(pod, gang, chosen)
        _emit(output, doc, format_why(doc))
    return _run("explain", Source(server, traces, at, timeout), run)


explain.add_command(explain_pod, "pods")


COMMANDS = (get, describe, explain)
