"""The worker's HTTP views: the gang table as JSON, "why is this pod pending", and metrics.

Where it sits: the read side of the streaming shell. ``register(app, store, settings)`` mounts
the views on Faust's web server (on only with ``gangstate worker --http-port PORT``, bound to
127.0.0.1); Faust's own ``/table``, ``/router``, ``/graph`` and stats views stay disabled.

| path | answer |
|---|---|
| ``GET /gangs?namespace=NS&phase=PHASE&scheduler=S&cluster=C`` | ``{"gangs": [gang_row, ...]}`` of the worker group's gangs of cluster ``C`` (default ``default``; ``all_clusters=1`` instead: every cluster's), sorted by cluster, then gang id; ``Deleted`` gangs only with ``phase=Deleted``; ``scheduler``: ``koord-scheduler`` or ``kube-scheduler`` (default both) |
| ``GET /gangs/{namespace}/{name}?cluster=C`` | ``gang_detail`` of the gang of cluster ``C`` (default ``default``): ``summary`` + ``deleted`` + ``findings`` + ``history`` (routed to the owner of its key) |
| ``GET /pods/{namespace}/{name}/why?gang=NS/NAME&cluster=C`` | ``why_pod`` of the pod of cluster ``C`` (default ``default``; routed to the owner of ``gang``'s key; without ``gang``, the gang of that cluster that has the pod, this worker's or else the first other worker's that has it) |
| ``GET /fleet`` | ``{"clusters": [fleet_summary row, ...]}``: one row per cluster of the worker group's gangs, and per cluster whose watch producer's ticks a worker folded |
| ``GET /metrics`` | Prometheus text (``streams.worker.metrics``) |
| ``GET /readyz`` | ``ready`` (200) once the worker has its partitions and has recovered the table; else 503 ``not ready: REASON`` (and while it waits for Kafka, ``streams.worker.app.run_worker``) |

With several workers (one consumer group), ``/gangs``, ``/fleet`` and ``/why`` without ``gang``
gather: the worker asked answers for the gangs it owns and asks every other worker of the group
(the hosts of Faust's partition assignment, ``app.router.tables_metadata``) the same with
``scope=local``, which answers for its own gangs only; the answers are merged
(``streams.query.answers.merged_gang_rows``, ``merged_fleet``). A worker that does not answer
within ``PEER_TIMEOUT_SECONDS`` (or a gang's owner, for a request forwarded to it) makes the
answer 503, never a part of the fleet passed off as all of it; the query commands ask again.
``/metrics`` stays per worker (each is scraped).

The documents come from ``streams.query.answers`` (the same builders the offline CLI prints);
this module only routes requests to the worker that owns the gang and serves them.

Must not: decide or explain anything itself, write to the table, or import Faust at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from streams.core.cluster import DEFAULT_CLUSTER, key_of
from streams.core.state import GangState
from streams.kafka.partitions import partition_of
from streams.query.answers import (NotFound, check_cluster, explain_pod, fleet_summary,
                                   gang_detail, gang_rows, in_cluster, merged_fleet,
                                   merged_gang_rows)

if TYPE_CHECKING:  # pragma: no cover
    import faust

    from streams.settings import Settings
    from streams.worker.metrics import WorkerMetrics

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


def present(states: Mapping[str, GangState]) -> Iterator[tuple[str, GangState]]:
    """``(key, state)`` of every gang of ``states``, skipping a key that vanishes while it is
    read (a gang removed by the fold between the listing and the read)."""
    for key in list(states):
        state = states.get(key)
        if state is not None:
            yield key, state


TRUE = ("1", "true", "yes")
"""The values of a flag in a query string that turn it on (``all_clusters=1``)."""


def cluster_param(query: Mapping[str, str], every: bool = False) -> str | None:
    """The cluster a request asks about: its ``cluster`` parameter (default ``default``), or
    ``None`` (every cluster) with ``every`` and ``all_clusters=1``. Raises ``ValueError`` (400)
    for a bad cluster id, or for both parameters."""
    cluster = query.get("cluster") or None
    if every and (query.get("all_clusters") or "").lower() in TRUE:
        if cluster is not None:
            raise ValueError("cluster and all_clusters exclude each other")
        return None
    return check_cluster(cluster or DEFAULT_CLUSTER)


SCOPE = "scope"
"""The query parameter a worker adds when it asks another worker of its group
(``scope=local``): answer for your own gangs only, ask no one else."""
PEER_TIMEOUT_SECONDS = 10.0
"""How long a worker waits for another worker's answer before its own answer is 503."""


def asked_by_a_peer(query: Mapping[str, str]) -> bool:
    """True for a request with ``scope=local`` (another worker gathering answers)."""
    return (query.get(SCOPE) or "") == "local"


def _ident(url: str) -> tuple[str, int]:
    """``(host, port)`` of a worker's URL (port 80 when not given), as Faust's router compares
    them."""
    from urllib.parse import urlsplit

    parsed = urlsplit(url)
    return (parsed.hostname or "", parsed.port or 80)


def peer_urls(app: "faust.App") -> list[str]:
    """The advertised URLs (``canonical_url``) of the other workers of ``app``'s consumer
    group that hold partitions of its tables, from the latest assignment (sorted); ``[]``
    alone or before the first assignment."""
    try:
        hosts = app.router.tables_metadata()
    except (AttributeError, KeyError):
        return []
    me = _ident(str(app.conf.canonical_url))
    return sorted(url for url in hosts if _ident(url) != me)


def _peer_failures() -> tuple[type[BaseException], ...]:
    import asyncio

    import aiohttp

    return (aiohttp.ClientError, asyncio.TimeoutError, OSError)


PEER_FAILURES = _peer_failures()
"""What a request to another worker raises when that worker is gone or hung (Faust's router
forwards with aiohttp and lets them through: a 500 and a traceback before)."""


def owner_failed(app: "faust.App", table: str, key: str, err: BaseException) -> str:
    """The 503 message for a request forwarded to the owner of ``key`` that failed:
    ``worker URL did not answer (ERROR)``."""
    try:
        owner = str(app.router.key_store(table, key))
    except (KeyError, AttributeError):
        owner = "owning the gang"
    return f"worker {owner} did not answer ({type(err).__name__})"


class PeerUnavailable(Exception):
    """Another worker of the group did not answer (``str``: which and why, one line)."""


async def ask_peers(app: "faust.App", path: str, query: Mapping[str, str]
                    ) -> list[tuple[int, Any]]:
    """``GET path?query&scope=local`` of every other worker (``peer_urls``), at once:
    ``[(status, JSON body), ...]``. Raises ``PeerUnavailable`` when one cannot be reached,
    does not answer within ``PEER_TIMEOUT_SECONDS``, or answers other than 200/404."""
    import asyncio

    import aiohttp

    params = {**query, SCOPE: "local"}
    timeout = aiohttp.ClientTimeout(total=PEER_TIMEOUT_SECONDS)

    async def one(url: str) -> tuple[int, Any]:
        try:
            async with app.http_client.get(url.rstrip("/") + path, params=params,
                                           timeout=timeout) as resp:
                body = await resp.json(content_type=None)
                if resp.status not in (200, 404):
                    error = body.get("error") if isinstance(body, dict) else None
                    raise PeerUnavailable(f"worker {url} answered {resp.status}: "
                                          f"{error or 'no reason'}")
                return resp.status, body
        except PEER_FAILURES + (ValueError,) as err:
            raise PeerUnavailable(f"worker {url} did not answer ({type(err).__name__})"
                                  ) from None

    return list(await asyncio.gather(*(one(url) for url in peer_urls(app))))


def active_owner(app: "faust.App", settings: "Settings") -> Callable[[str], bool]:
    """``owned(gang id) -> bool``: true when the key's ``gang-events`` partition is actively
    assigned to this worker now (false for every key before the first assignment)."""
    topic = settings.topics.gang_events

    def owned(key: str) -> bool:
        try:
            actives = app.assignor.assigned_actives()
        except AttributeError:  # no assignment yet
            return False
        return any(tp.topic == topic and tp.partition == partition_of(key, settings.partitions)
                   for tp in actives)

    return owned


def readiness(app: "faust.App") -> str | None:
    """``None`` once ``app`` is ready to answer (it has joined its consumer group, has its
    partitions and has recovered the table), else why not (one line)."""
    if getattr(app, "rebalancing", False):
        return "joining the consumer group (rebalancing)"
    try:
        app.assignor.assigned_actives()
    except AttributeError:
        return "no partitions assigned yet"
    recovery = getattr(app.tables, "recovery", None)
    if recovery is not None and not recovery.completed.is_set():
        return "recovering the gang table from its changelog"
    return None


def register(app: "faust.App", store: Mapping[str, GangState], settings: "Settings", *,
             metrics: "WorkerMetrics | None" = None,
             clock: Callable[[str], int | None] | None = None,
             heard: Callable[[], Mapping[str, int]] | None = None) -> None:
    """Mount ``/gangs``, ``/gangs/{namespace}/{name}``, ``/pods/{namespace}/{name}/why``,
    ``/fleet``, ``/readyz`` (``readiness``) and ``/metrics`` on ``app``'s web server.

    ``store`` is the worker's ``TableStore`` (``key -> GangState``; its ``.table`` is the
    Faust table used to route a request to the worker that owns the key). ``metrics``: the
    app's ``WorkerMetrics`` (``None``: a fresh one, so ``/metrics`` serves the table gauges
    only); the table collector is added to its registry here. Errors are JSON ``{"error":
    message}``: 400 for a bad query, 404 for an unknown gang or pod, 503 while partitions are
    not assigned yet. ``clock(key)``: the event time a gang is read at (microseconds: the
    clock of the fold of its partition, ticks included; ``None``: the gang's own clock), so
    that the storm and the failure episode age with the partition's ticks
    (``streams.core.state.as_of``). ``heard()``: the clusters whose watch producers' ticks this
    worker folded, with the latest tick's event time (``PartitionFold.heard``, merged over its
    partitions), for ``/fleet``. The gang gauges name at most
    ``GANGSTATE_METRICS_MAX_CLUSTERS`` clusters (``TableCollector``).
    """
    from faust.exceptions import SameNode
    from faust.web import Request, Response, View

    from streams.settings import environment
    from streams.worker.metrics import TableCollector, WorkerMetrics

    table = getattr(store, "table")
    owned = active_owner(app, settings)
    local = OwnedStates(store, owned)
    served: WorkerMetrics = metrics or WorkerMetrics()
    served.registry.register(TableCollector(
        local, clock, max_clusters=environment().metrics_max_clusters))

    async def forwarded(view: View, request: Request, key: str) -> Response | None:
        """The answer of the worker that owns ``key`` to ``request`` (Faust's
        ``router.route_req``), ``None`` when this worker owns it; a 503 when the owner is gone,
        hung (``PEER_TIMEOUT_SECONDS``) or unreachable."""
        import asyncio

        try:
            answer: Response = await asyncio.wait_for(
                app.router.route_req(table.name, key, view.web, request), PEER_TIMEOUT_SECONDS)
        except SameNode:
            return None
        except PEER_FAILURES as err:
            return view.error(503, owner_failed(app, table.name, key, err))
        return answer

    @app.page("/gangs", name="gangs")
    class GangList(View):
        """``GET /gangs?namespace=NS&phase=PHASE&scheduler=S&cluster=C`` (or
        ``all_clusters=1``): the group's gangs (``scope=local``: this worker's), sorted by
        cluster, then gang id."""

        async def get(self, request: Request) -> Response:
            query = request.query
            try:
                rows = gang_rows(local.values(), query.get("namespace") or None,
                                 query.get("phase") or None, query.get("scheduler") or None,
                                 cluster_param(query, every=True))
            except ValueError as err:
                return self.error(400, str(err))
            if not asked_by_a_peer(query):
                try:
                    rows = merged_gang_rows([rows] + [body["gangs"] for _, body in
                                                      await ask_peers(app, "/gangs", query)])
                except PeerUnavailable as err:
                    return self.error(503, str(err))
            return self.json({"gangs": rows})

    @app.page("/gangs/{gang:[^/]+/[^/]+}", name="gang")
    class GangDetail(View):
        """``GET /gangs/{namespace}/{name}?cluster=C``: ``gang_detail``, answered by the owner
        of the gang's key in cluster ``C``."""

        async def get(self, request: Request, gang: str) -> Response:
            try:
                cluster = cluster_param(request.query)
            except ValueError as err:
                return self.error(400, str(err))
            cluster = cluster or DEFAULT_CLUSTER
            key = key_of(cluster, gang)
            # table_route's routing, by the key (the cluster is a query parameter)
            answer = await forwarded(self, request, key)
            if answer is not None:
                return answer
            state = store.get(key)
            if state is None:
                return self.error(404, f"gang {gang} not found{in_cluster(cluster)}")
            return self.json(gang_detail(state, None if clock is None else clock(key)))

    @app.page("/pods/{namespace}/{name}/why", name="why")
    class PodWhy(View):
        """``GET /pods/{namespace}/{name}/why?gang=NS/NAME&cluster=C``: ``why_pod`` of the
        pod of cluster ``C``."""

        async def get(self, request: Request, namespace: str, name: str) -> Response:
            gang = request.query.get("gang") or None
            pod = f"{namespace}/{name}"
            try:
                cluster = cluster_param(request.query) or DEFAULT_CLUSTER
            except ValueError as err:
                return self.error(400, str(err))
            if gang is not None:
                # the same routing as table_route, by the gang's key
                answer = await forwarded(self, request, key_of(cluster, gang))
                if answer is not None:
                    return answer
            try:
                return self.json(explain_pod(store if gang else local, pod, gang, clock,
                                             cluster))
            except NotFound as err:
                if gang is not None or asked_by_a_peer(request.query):
                    return self.error(404, str(err))
                missing = str(err)
            try:  # the pod's gang may be another worker's
                for status, body in await ask_peers(app, request.url.path, request.query):
                    if status == 200:
                        return self.json(body)
            except PeerUnavailable as err:
                return self.error(503, str(err))
            return self.error(404, missing)

    @app.page("/fleet", name="fleet")
    class Fleet(View):
        """``GET /fleet``: ``fleet_summary`` of the group's gangs (``scope=local``: this
        worker's), one row per cluster."""

        async def get(self, request: Request) -> Response:
            rows = fleet_summary(present(local), clock, None if heard is None else heard())
            if not asked_by_a_peer(request.query):
                try:
                    rows = merged_fleet([rows] + [body["clusters"] for _, body in
                                                  await ask_peers(app, "/fleet", request.query)])
                except PeerUnavailable as err:
                    return self.error(503, str(err))
            return self.json({"clusters": rows})

    @app.page("/readyz", name="readyz")
    class Ready(View):
        """``GET /readyz``: ``readiness(app)`` as plain text, 200 or 503."""

        async def get(self, request: Request) -> Response:
            reason = readiness(app)
            if reason is None:
                return self.text("ready\n")
            return self.text(f"not ready: {reason}\n", status=503)

    @app.page("/metrics", name="metrics")
    class Metrics(View):
        """``GET /metrics``: the app's registry in the Prometheus text format."""

        async def get(self, request: Request) -> Response:
            body, content_type = served.exposition()
            return self.bytes(body, headers={"Content-Type": content_type})
