"""What the query commands answer, as plain documents built from gang states.

Where it sits: the query side, over ``streams.core``. ``gang_rows``, ``gang_detail``,
``explain_pod`` and ``fleet_summary`` are plain functions of ``GangState`` values, so that
``gangstate get/describe/explain --from TRACE`` prints exactly what a worker serves
(``streams.worker.web`` mounts them over HTTP). Everything they say comes from ``streams.core``
(``summary``, ``explain.findings``, ``explain.why_pod``); this module only selects and shapes.

Fleets (issue 27, ``streams.core.cluster``): a gang is known by its cluster and its id within
the cluster; the mappings these functions read are keyed by keys (``eu-1:team-a/llm``, the bare
id in ``default``). Rows name their ``cluster``; a person's ``NAMESPACE/NAME`` is resolved
within one cluster (``DEFAULT_CLUSTER`` unless told).

Must not: decide or explain anything itself, do I/O, or import Faust, Kafka or the worker.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from streams.core.cluster import DEFAULT_CLUSTER, cluster_of_key, cluster_problem, key_of
from streams.core.episode import per_minute
from streams.core.explain import deletion, findings, why_pod
from streams.core.native import KUBE_SCHEDULER, SCHEDULERS, composite_key, gang_key, split_gang
from streams.core.state import GangState, as_of, summary
from streams.core.timefmt import format_time, parse_time

PHASES = ("NotInitialized", "Gathering", "Ready", "Scheduling", "Scheduled", "Degraded",
          "Finished", "Deleted")
"""Every value of ``GangState.phase`` (contracts.md, ``gangstate fold``)."""
HIDDEN_PHASES = ("Deleted",)
"""Phases ``gang_rows`` leaves out unless asked for by name: a deleted gang is not a live gang
(its tombstone stays in the table; ``describe gang`` explains it)."""

ROW_FIELDS = ("scheduler", "phase", "members", "bound", "waiting", "min_member",
              "representative")

FLEET_PHASES = ("NotInitialized", "Gathering", "Ready", "Scheduling", "Scheduled", "Degraded")
"""The phases ``fleet_summary`` counts in columns of their own; the others but ``Deleted``
(``Finished``) are counted under ``"other"``."""


class NotFound(LookupError):
    """A gang or pod the table does not know; ``str(err)`` is the message for people."""


def gang_row(state: GangState) -> dict[str, Any]:
    """One line of the gang list: ``{"cluster", "gang", "namespace", "name", "scheduler",
    "phase", "members", "bound", "waiting", "min_member", "representative"}``; ``cluster`` is
    the gang's cluster id (``default`` included), ``gang`` its id within the cluster, ``name``
    the gang's (its PodGroup's) without the scheduler, ``scheduler`` ``koord-scheduler`` or
    ``kube-scheduler``; counts are pods, ``min_member`` (a native gang's minCount) and
    ``representative`` are ``None`` when unknown."""
    info = summary(state)
    return {"cluster": state.cluster, "gang": state.gang, "namespace": state.namespace,
            "name": state.name, **{k: info[k] for k in ROW_FIELDS}}


def check_cluster(cluster: str) -> str:
    """``cluster`` when it is a cluster id (``streams.core.cluster.cluster_problem``); raises
    ``ValueError`` (one line) when not."""
    problem = cluster_problem(cluster)
    if problem is not None:
        raise ValueError(problem)
    return cluster


def gang_rows(states: Iterable[GangState], namespace: str | None = None,
              phase: str | None = None, scheduler: str | None = None,
              cluster: str | None = DEFAULT_CLUSTER) -> list[dict[str, Any]]:
    """``gang_row`` of each state of ``cluster`` (``None``: every cluster) in ``namespace``,
    ``phase`` (``None``: any phase but the ``HIDDEN_PHASES``) and ``scheduler`` (``None``:
    both), sorted by cluster, then gang id (namespace, name). ``phase`` matches
    case-insensitively (``ready`` = ``Ready``). Raises ``ValueError`` when ``phase`` is not one
    of ``PHASES``, ``scheduler`` not one of ``SCHEDULERS`` or ``cluster`` not a cluster id."""
    if phase is not None:
        canonical = {p.lower(): p for p in PHASES}.get(phase.lower())
        if canonical is None:
            raise ValueError(f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
        phase = canonical
    if scheduler is not None and scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; one of {', '.join(SCHEDULERS)}")
    if cluster is not None:
        check_cluster(cluster)
    rows = [gang_row(s) for s in states
            if (cluster is None or s.cluster == cluster)
            and (namespace is None or s.namespace == namespace)
            and (scheduler is None or s.scheduler == scheduler)
            and (s.phase == phase if phase is not None else s.phase not in HIDDEN_PHASES)]
    return sorted(rows, key=lambda r: (r["cluster"], r["gang"]))


def merged_gang_rows(parts: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The ``gang_rows`` answers of several workers (each over the gangs it owns, so no gang is
    in two) as one answer: all rows, sorted by cluster, then gang id, as ``gang_rows`` sorts."""
    return sorted((row for part in parts for row in part),
                  key=lambda r: (r["cluster"], r["gang"]))


def merged_fleet(parts: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The ``fleet_summary`` answers of several workers as one, sorted by cluster: a cluster's
    rows are summed (``gangs``, each of ``phases``, ``warning_gangs``, ``warnings``,
    ``failed_events_per_minute``: every worker counts the gangs it owns), its ``last_tick`` is
    the latest any worker folded, and ``tick_behind_seconds`` is counted again from the latest
    tick of any cluster in any answer (whole seconds; ``None`` for a cluster no worker heard).
    E.g. ``eu-1`` with 2 gangs on one worker and 1 on another is one row of 3 gangs."""
    rows: dict[str, dict[str, Any]] = {}
    for part in parts:
        for row in part:
            mine = rows.get(row["cluster"])
            if mine is None:
                rows[row["cluster"]] = {**row, "phases": dict(row["phases"])}
                continue
            for field in ("gangs", "warning_gangs", "warnings", "failed_events_per_minute"):
                mine[field] += row[field]
            for phase, count in row["phases"].items():
                mine["phases"][phase] = mine["phases"].get(phase, 0) + count
            if row["last_tick"] is not None and (
                    mine["last_tick"] is None
                    or parse_time(row["last_tick"]) > parse_time(mine["last_tick"])):
                mine["last_tick"] = row["last_tick"]
    ticks = {c: parse_time(r["last_tick"]) for c, r in rows.items() if r["last_tick"]}
    newest = max(ticks.values(), default=0)
    for cluster, row in rows.items():
        tick = ticks.get(cluster)
        row["tick_behind_seconds"] = None if tick is None else (newest - tick) // 1_000_000
    return [rows[c] for c in sorted(rows)]


def history(state: GangState) -> list[dict[str, str]]:
    """The gang's recorded transitions, oldest first: ``[{"at": RFC 3339, "change",
    "cause"}]``."""
    return [{"at": format_time(at), "change": change, "cause": cause}
            for at, change, cause in state.history]


def gang_detail(state: GangState, now: int | None = None) -> dict[str, Any]:
    """The one-gang document: ``{"gang", **summary(state), "shim_reports" (a scheduler shim
    reports the gang: its representative is known when it has one), "deleted":
    deletion(state), "findings": findings(state), "history": history(state)}`` (shapes in
    ``streams.core.state.summary`` and ``streams.core.explain``; ``deleted`` is ``None`` while
    the gang exists), read at event time ``now`` (microseconds: the fold's clock, ticks
    included; ``None``: the gang's own clock, ``state.as_of``)."""
    state = as_of(state, now)
    return {"gang": state.gang, **summary(state), "shim_reports": state.shim_at is not None,
            "deleted": deletion(state), "findings": findings(state), "history": history(state)}


def gang_candidates(gang: str, scheduler: str | None = None) -> list[str]:
    """The gang ids a person's ``NAMESPACE/NAME`` may mean: with ``scheduler`` only that
    scheduler's; without, Koordinator's, then the native PodGroup's (``ns/name@kube-scheduler``)
    and the native CompositePodGroup's (``ns/composite:name@kube-scheduler``); an id that
    already names its scheduler means itself; a key (``eu-1:ns/name``: its "namespace" has a
    ``:``) means none (a cluster is chosen by ``cluster``, never by a name). Ids within a cluster: ``candidate_keys`` gives
    their keys in one. Raises ``ValueError`` for an unknown ``scheduler``."""
    if scheduler is not None and scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; one of {', '.join(SCHEDULERS)}")
    namespace, name, named = split_gang(gang)
    if ":" in namespace:  # a key (eu-1:ns/name) is no NAMESPACE/NAME: it names no gang here
        return []
    if gang.endswith("@" + KUBE_SCHEDULER):
        return [gang] if scheduler in (None, named) else []
    out = [] if scheduler == KUBE_SCHEDULER else [gang_key(namespace, name)]
    if scheduler in (None, KUBE_SCHEDULER):
        out += [gang_key(namespace, name, KUBE_SCHEDULER), composite_key(namespace, name)]
    return out


def candidate_keys(gang: str, scheduler: str | None = None,
                   cluster: str = DEFAULT_CLUSTER) -> list[str]:
    """The keys of ``gang_candidates(gang, scheduler)`` in ``cluster`` (``eu-1:team-a/llm``;
    the bare ids in ``default``). Raises ``ValueError`` for an unknown ``scheduler`` or a bad
    cluster id."""
    check_cluster(cluster)
    return [key_of(cluster, g) for g in gang_candidates(gang, scheduler)]


def in_cluster(cluster: str | None) -> str:
    """`` in cluster C`` to end a message about a gang or pod of cluster ``C``; empty for
    ``default`` (the messages of a gangstate without fleet stay as they were) and for every
    cluster (``None``)."""
    return "" if cluster in (None, DEFAULT_CLUSTER) else f" in cluster {cluster}"


def resolve_gang(states: Mapping[str, GangState], gang: str,
                 scheduler: str | None = None, cluster: str = DEFAULT_CLUSTER) -> GangState:
    """The state ``gang`` (``NAMESPACE/NAME``, ``scheduler`` as in ``gang_candidates``) names
    in ``cluster`` (``states`` is keyed by keys: ``candidate_keys``). Raises ``NotFound`` when
    none is known there (a gang of that name in another cluster is another gang), or when both
    schedulers have a gang of that name and ``scheduler`` does not say which; ``ValueError``
    for a bad cluster id."""
    found = [states[k] for k in candidate_keys(gang, scheduler, cluster) if k in states]
    if not found:
        other, _, plain = gang.partition(":")
        hint = f" (a namespace has no ':'; for cluster {other}'s gang: {plain} --cluster " \
               f"{other})" if ":" in gang.partition("/")[0] else ""
        raise NotFound(f"gang {gang} not found{in_cluster(cluster)}{hint}")
    if len(found) > 1:
        raise NotFound(ambiguous(gang, [s.gang for s in found]))
    return found[0]


def ambiguous(gang: str, ids: list[str]) -> str:
    """What to say when ``NAMESPACE/NAME`` ``gang`` names several gangs (``ids``): which, and
    how to pick one (``--scheduler``, or the id itself)."""
    return (f"gang {gang} names {len(ids)} gangs: {', '.join(ids)}; say which with "
            f"--scheduler, or give the id")


def _knows_pod(state: GangState, pod: str) -> bool:
    """True when pod ``ns/name`` is a live member of the gang, or one of the pods dropped with
    its PodGroup (``GangState.orphans``, which ``why_pod`` explains too)."""
    return state.member_by_name(pod) is not None or state.orphan_by_name(pod) is not None


def find_gang_of_pod(states: Iterable[GangState], pod: str,
                     cluster: str = DEFAULT_CLUSTER) -> GangState | None:
    """The gang of ``cluster`` (first in gang id order) whose live members, or pods dropped
    with its PodGroup, include pod ``ns/name``, or ``None``."""
    for state in sorted((s for s in states if s.cluster == cluster), key=lambda s: s.gang):
        if _knows_pod(state, pod):
            return state
    return None


def explain_pod(states: Mapping[str, GangState], pod: str, gang: str | None = None,
                now: Callable[[str], int | None] | None = None,
                cluster: str = DEFAULT_CLUSTER) -> dict[str, Any]:
    """``why_pod`` for pod ``ns/name`` of ``cluster`` in gang ``gang`` (``None``: the gang of
    that cluster whose members include the pod), read at event time ``now(key)``
    (microseconds: the clock of the fold that owns the gang's key; ``None``: the gang's own
    clock, ``state.as_of``); outside the ``default`` cluster the answer names its ``cluster``
    first, as ``summary`` does. Raises ``NotFound`` when the gang is unknown in ``cluster`` or the
    pod is not one of its live members; ``ValueError`` for a bad cluster id."""
    check_cluster(cluster)
    if gang is not None:
        state = resolve_gang(states, gang, cluster=cluster)
        if not _knows_pod(state, pod):
            raise NotFound(f"pod {pod} is not a live member of gang {gang}{in_cluster(cluster)}")
    else:
        found = find_gang_of_pod(states.values(), pod, cluster)
        if found is None:
            raise NotFound(f"pod {pod} is not a live member of any known gang"
                           f"{in_cluster(cluster)}")
        state = found
    why = why_pod(as_of(state, None if now is None else now(state.key)), pod)
    return why if state.cluster == DEFAULT_CLUSTER else {"cluster": state.cluster, **why}


def fleet_summary(gangs: Iterable[tuple[str, GangState]],
                  now: Callable[[str], int | None] | None = None,
                  heard: Mapping[str, int] | None = None) -> list[dict[str, Any]]:
    """One row per cluster of the ``(key, state)`` pairs ``gangs``, sorted by cluster id:
    ``{"cluster", "gangs", "phases": {"NotInitialized", "Gathering", "Ready", "Scheduling",
    "Scheduled", "Degraded", "other"}, "warning_gangs", "warnings", "failed_events_per_minute",
    "last_tick", "tick_behind_seconds"}``.

    The cluster is the key's (``streams.core.cluster.cluster_of_key``). ``Deleted`` gangs (the
    tombstones ``get gangs`` leaves out) are not counted, and a cluster with no other gang has
    no row unless it is ``heard``. ``gangs`` counts the rest; ``phases`` counts them by phase (``FLEET_PHASES``,
    ``other``: ``Finished``). ``warnings`` counts the open findings of type ``Warning``
    (``streams.core.explain.findings``, what ``describe gang`` lists), ``warning_gangs`` the
    gangs with at least one; ``failed_events_per_minute`` sums the scheduler's FailedScheduling
    Events in the last 60 s of event time over the cluster's gangs (each gang's storm, as
    ``describe gang`` shows it: ``streams.core.episode.per_minute``). Each gang is read at
    ``now(key)`` (microseconds of event time; ``None``: its own clock, ``state.as_of``).

    ``heard`` (cluster id -> event time of the latest tick its watch producer sent:
    ``streams.core.fold.PartitionFold.heard``) adds a row for each cluster heard that has no
    gang (a connected cluster with nothing to tell), and gives every row ``last_tick`` (RFC
    3339) and ``tick_behind_seconds`` (whole seconds behind the latest tick of any cluster: a
    cluster whose watch producer stopped falls behind); both are ``None`` for a cluster not
    heard (a trace, or a worker that has had no tick of it).
    """
    heard = heard or {}
    newest = max(heard.values(), default=0)

    def new_row(cluster: str) -> dict[str, Any]:
        tick = heard.get(cluster)
        return {"cluster": cluster, "gangs": 0,
                "phases": {**dict.fromkeys(FLEET_PHASES, 0), "other": 0},
                "warning_gangs": 0, "warnings": 0, "failed_events_per_minute": 0,
                "last_tick": None if tick is None else format_time(tick),
                "tick_behind_seconds": None if tick is None else (newest - tick) // 1_000_000}

    rows: dict[str, dict[str, Any]] = {c: new_row(c) for c in heard}
    for key, state in gangs:
        if state.phase in HIDDEN_PHASES:
            continue
        cluster = cluster_of_key(key)
        row = rows.get(cluster)
        if row is None:
            row = rows[cluster] = new_row(cluster)
        state = as_of(state, None if now is None else now(key))
        row["gangs"] += 1
        row["phases"][state.phase if state.phase in FLEET_PHASES else "other"] += 1
        warnings = sum(1 for f in findings(state) if f["type"] == "Warning")
        row["warnings"] += warnings
        row["warning_gangs"] += 1 if warnings else 0
        row["failed_events_per_minute"] += per_minute(state.storm, state.clock)
    return [rows[c] for c in sorted(rows)]
