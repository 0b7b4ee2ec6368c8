"""The worker's HTTP views: the gang table as JSON, "why is this pod pending", and metrics.

Where it sits: the read side of the streaming shell. ``register(app, store, settings)`` mounts
the views on Faust's web server (on only with ``gangstate worker --web-port PORT``, bound to
127.0.0.1); Faust's own ``/table``, ``/router``, ``/graph`` and stats views stay disabled.

| path | answer |
|---|---|
| ``GET /gangs?namespace=NS&phase=PHASE`` | ``{"gangs": [gang_row, ...]}`` of this worker's gangs, sorted by gang id; ``Deleted`` gangs only with ``phase=Deleted`` |
| ``GET /gangs/{namespace}/{name}`` | ``gang_detail``: ``summary`` + ``deleted`` + ``findings`` + ``history`` (routed to the owner) |
| ``GET /pods/{namespace}/{name}/why?gang=NS/NAME`` | ``why_pod`` (routed to the owner of ``gang``; without it, the local gang that has the pod) |
| ``GET /metrics`` | Prometheus text (``streams.worker.metrics``) |

The document builders (``gang_row``, ``gang_detail``, ``find_gang_of_pod``) are plain functions
of ``GangState`` values so that ``gangstate get/describe/explain --from TRACE`` prints exactly
what a worker would serve. Everything they say comes from ``streams.core`` (``summary``,
``explain.findings``, ``explain.why_pod``); this module only selects and shapes.

Must not: decide or explain anything itself, write to the table, or import Faust at module level
(the offline CLI imports the builders without a broker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from streams.core.explain import deletion, findings, why_pod
from streams.core.state import GangState, summary
from streams.core.timefmt import format_time

if TYPE_CHECKING:  # pragma: no cover
    import faust

    from streams.kafka.settings import Settings
    from streams.worker.metrics import WorkerMetrics

PHASES = ("NotInitialized", "Gathering", "Ready", "Scheduling", "Scheduled", "Finished",
          "Deleted")
"""Every value of ``GangState.phase`` (contracts.md, ``gangstate fold``)."""
HIDDEN_PHASES = ("Deleted",)
"""Phases ``gang_rows`` leaves out unless asked for by name: a deleted gang is not a live gang
(its tombstone stays in the table; ``describe gang`` explains it)."""

ROW_FIELDS = ("phase", "members", "bound", "waiting", "min_member", "representative")


class NotFound(LookupError):
    """A gang or pod the table does not know; ``str(err)`` is the message for people."""


def gang_row(state: GangState) -> dict[str, Any]:
    """One line of the gang list: ``{"gang", "namespace", "name", "phase", "members",
    "bound", "waiting", "min_member", "representative"}``; counts are pods, ``min_member`` and
    ``representative`` are ``None`` when unknown."""
    info = summary(state)
    namespace, _, name = state.gang.partition("/")
    return {"gang": state.gang, "namespace": namespace, "name": name,
            **{k: info[k] for k in ROW_FIELDS}}


def gang_rows(states: Iterable[GangState], namespace: str | None = None,
              phase: str | None = None) -> list[dict[str, Any]]:
    """``gang_row`` of each state in ``namespace`` and ``phase`` (``None``: any phase but the
    ``HIDDEN_PHASES``), sorted by gang id. ``phase`` matches case-insensitively (``ready`` =
    ``Ready``). Raises ``ValueError`` when ``phase`` is not one of ``PHASES``."""
    if phase is not None:
        canonical = {p.lower(): p for p in PHASES}.get(phase.lower())
        if canonical is None:
            raise ValueError(f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
        phase = canonical
    rows = [gang_row(s) for s in states
            if (namespace is None or s.namespace == namespace)
            and (s.phase == phase if phase is not None else s.phase not in HIDDEN_PHASES)]
    return sorted(rows, key=lambda r: r["gang"])


def history(state: GangState) -> list[dict[str, str]]:
    """The gang's recorded transitions, oldest first: ``[{"at": RFC 3339, "change",
    "cause"}]``."""
    return [{"at": format_time(at), "change": change, "cause": cause}
            for at, change, cause in state.history]


def gang_detail(state: GangState) -> dict[str, Any]:
    """The one-gang document: ``{"gang", **summary(state), "deleted": deletion(state),
    "findings": findings(state), "history": history(state)}`` (shapes in
    ``streams.core.state.summary`` and ``streams.core.explain``; ``deleted`` is ``None`` while
    the gang exists)."""
    return {"gang": state.gang, **summary(state), "deleted": deletion(state),
            "findings": findings(state), "history": history(state)}


def find_gang_of_pod(states: Iterable[GangState], pod: str) -> GangState | None:
    """The gang (first in gang id order) whose live members include pod ``ns/name``, or
    ``None``."""
    for state in sorted(states, key=lambda s: s.gang):
        if state.member_by_name(pod) is not None:
            return state
    return None


def explain_pod(states: Mapping[str, GangState], pod: str, gang: str | None = None
                ) -> dict[str, Any]:
    """``why_pod`` for pod ``ns/name`` in gang ``gang`` (``None``: the gang whose members
    include the pod). Raises ``NotFound`` when the gang is unknown or the pod is not one of its
    live members."""
    if gang is not None:
        state = states.get(gang)
        if state is None:
            raise NotFound(f"gang {gang} not found")
        if state.member_by_name(pod) is None:
            raise NotFound(f"pod {pod} is not a live member of gang {gang}")
    else:
        state = find_gang_of_pod(states.values(), pod)
        if state is None:
            raise NotFound(f"pod {pod} is not a live member of any known gang")
    return why_pod(state, pod)


class OwnedStates(Mapping[str, GangState]):
    """The gangs of ``store`` that this worker owns: keys whose ``gang-events`` partition is
    one of its active partitions (standby copies are left out, so that several workers do not
    report a gang twice). ``owned(key) -> bool`` decides; reads go through the store's cache."""

    def __init__(self, store: Mapping[str, GangState], owned: Callable[[str], bool]) -> None:
        self.store = store
        self.owned = owned

    def __getitem__(self, key: str) -> GangState:
        if not self.owned(key):
            raise KeyError(key)
        return self.store[key]

    def __iter__(self) -> Any:
        return (k for k in list(self.store) if self.owned(k))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def active_owner(app: "faust.App", settings: "Settings") -> Callable[[str], bool]:
    """``owned(gang id) -> bool``: true when the key's ``gang-events`` partition is actively
    assigned to this worker now (false for every key before the first assignment)."""
    from streams.worker.app import partition_of

    topic = settings.topics.gang_events

    def owned(key: str) -> bool:
        try:
            actives = app.assignor.assigned_actives()
        except AttributeError:  # no assignment yet
            return False
        return any(tp.topic == topic and tp.partition == partition_of(key, settings.partitions)
                   for tp in actives)

    return owned


def register(app: "faust.App", store: Mapping[str, GangState], settings: "Settings", *,
             metrics: "WorkerMetrics | None" = None) -> None:
    """Mount ``/gangs``, ``/gangs/{namespace}/{name}``, ``/pods/{namespace}/{name}/why`` and
    ``/metrics`` on ``app``'s web server.

    ``store`` is the worker's ``TableStore`` (``gang id -> GangState``; its ``.table`` is the
    Faust table used to route a request to the worker that owns the key). ``metrics``: the
    app's ``WorkerMetrics`` (``None``: a fresh one, so ``/metrics`` serves the table gauges
    only); the table collector is added to its registry here. Errors are JSON ``{"error":
    message}``: 400 for a bad query, 404 for an unknown gang or pod, 503 while partitions are
    not assigned yet.
    """
    from faust.exceptions import SameNode
    from faust.web import Request, Response, View

    from streams.worker.metrics import TableCollector, WorkerMetrics

    table = getattr(store, "table")
    owned = active_owner(app, settings)
    local = OwnedStates(store, owned)
    metrics = metrics or WorkerMetrics()
    metrics.registry.register(TableCollector(local))

    @app.page("/gangs", name="gangs")
    class GangList(View):
        """``GET /gangs?namespace=NS&phase=PHASE``: this worker's gangs, sorted by gang id."""

        async def get(self, request: Request) -> Response:
            query = request.query
            try:
                rows = gang_rows(local.values(), query.get("namespace") or None,
                                 query.get("phase") or None)
            except ValueError as err:
                return self.error(400, str(err))
            return self.json({"gangs": rows})

    @app.page("/gangs/{gang:[^/]+/[^/]+}", name="gang")
    class GangDetail(View):
        """``GET /gangs/{namespace}/{name}``: ``gang_detail``, answered by the key's owner."""

        @app.table_route(table=table, match_info="gang")
        async def get(self, request: Request, gang: str) -> Response:
            state = store.get(gang)
            if state is None:
                return self.error(404, f"gang {gang} not found")
            return self.json(gang_detail(state))

    @app.page("/pods/{namespace}/{name}/why", name="why")
    class PodWhy(View):
        """``GET /pods/{namespace}/{name}/why?gang=NS/NAME``: ``why_pod`` of the pod."""

        async def get(self, request: Request, namespace: str, name: str) -> Response:
            gang = request.query.get("gang") or None
            pod = f"{namespace}/{name}"
            if gang is not None:
                try:  # the same routing as table_route, by the query parameter
                    return await app.router.route_req(table.name, gang, self.web, request)
                except SameNode:
                    pass
            try:
                return self.json(explain_pod(store if gang else local, pod, gang))
            except NotFound as err:
                return self.error(404, str(err))

    @app.page("/metrics", name="metrics")
    class Metrics(View):
        """``GET /metrics``: the app's registry in the Prometheus text format."""

        async def get(self, request: Request) -> Response:
            body, content_type = metrics.exposition()
            return self.bytes(body, headers={"Content-Type": content_type})
