"""A TEST API SERVER: an in-process test double that speaks the Kubernetes list/watch protocol.

Where it sits: test infrastructure only. The watch producer (``producers.watch.watching``) and, next, the
Event-writing sink are driven against it with the real ``kubernetes`` Python client
(``ApiServerDouble.configuration()`` gives a ``kubernetes.client.Configuration`` pointing at
``http://127.0.0.1:PORT``). It is not a cluster and must never be called one: there is no
scheduler, no admission, no garbage collection, no authentication.

What it serves (Kubernetes API conventions, https://kubernetes.io/docs/reference/using-api/api-concepts/):
- Resources: core/v1 ``pods`` and ``events``, ``scheduling.sigs.k8s.io/v1alpha1`` ``podgroups``
  (absent, i.e. 404 as when the CRD is not installed, with ``crds=False``) and
  ``events.k8s.io/v1`` ``events``; cluster-wide (``/api/v1/pods``) and namespaced
  (``/api/v1/namespaces/{ns}/pods[/{name}]``) paths.
- Verbs: list (``limit``/``continue`` chunks, ``fieldSelector``, ``labelSelector``), get,
  create (POST, 409 on a taken name), replace (PUT), patch (JSON merge patch and
  strategic-merge patch both applied as RFC 7386 merge; JSON patch lists with add/replace/
  remove), delete.
- Watch (``?watch=1``): a chunked stream of JSON lines ``{"type", "object"}`` starting after the
  given ``resourceVersion`` (``""``/``"0"``: synthetic ADDED for what exists first);
  ``allowWatchBookmarks`` BOOKMARK events every ``bookmark_interval`` seconds; ``timeoutSeconds``
  ends the stream cleanly; a selector match that starts/stops reads as ADDED/DELETED, as the
  real watch cache does. Too-old resourceVersions (older than the last ``compact()``) answer
  410 Gone on watch and on list continue tokens; ``compact(expire_watches=True)`` also sends an
  ``ERROR`` event with a 410 ``Status`` into every open watch and closes it.
- resourceVersion is one global counter, as etcd's revision.

Authorisation, off by default (every request is served): ``allow_only(rules)`` turns on an RBAC
authoriser for every HTTP request (not for the Python API). Each request is turned into its
request attributes as kube-apiserver's ``RequestInfoFactory`` does (``k8s.io/apiserver``
``pkg/endpoints/request/requestinfo.go``): API group (``""`` for ``/api/v1``), resource, namespace,
name and verb (GET with a name ``get``, without ``list``, with ``watch=1`` ``watch``; POST
``create``; PUT ``update``; PATCH ``patch``; DELETE ``delete``), and it is allowed when one
PolicyRule (``apiGroups``, ``resources``, ``verbs``, ``*`` wildcards) covers all three, as the RBAC
authoriser's ``RuleAllows`` does (``plugin/pkg/auth/authorizer/rbac/rbac.go``; ``resourceNames``
and subresources are not modelled). A refused request is answered 403 with the Status the real
server sends (reason ``Forbidden``, message ``<resource>[.<group>] "<name>" is forbidden: User
"<user>" cannot <verb> resource "<resource>" in API group "<group>" in the namespace "<ns>"``).

Liberties, on purpose: core/v1 and events.k8s.io/v1 Events are two separate stores (a real API
server serves one store in two shapes); the Python ``apply`` accepts an object whose name is
taken by another uid (so recorded traces in which a same-name pod is recreated before the old
one's DELETED arrives can be served); list pages after the first read the current state of the
keys after the token (a real server serves a consistent snapshot).

Python API for tests: ``apply(obj)``, ``delete(kind, ns, name, uid=None)``, ``compact()``,
``drop_watches()``, ``pause_watches()``/``resume_watches()``, ``stall_watches(flag)``,
``refuse_watches(flag)``,
``objects(kind)``, ``open_watches(kind)``, ``requests`` (a log of ``(method, path, query)``),
``fail_next(status, count, method=None, retry_after=None)`` (answer the next requests with an
error ``Status``, for retry tests), ``allow_only(rules, user)`` (authorise requests as RBAC does:
only those matching one of the given PolicyRules are served, the others get 403 Forbidden;
``forbidden`` lists what was refused).
"""

from __future__ import annotations

import base64
import copy
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class _Kind:
    key: str
    prefix: str
    plural: str
    kind: str
    api_version: str
    builtin: bool  # built-in list items carry no kind/apiVersion; custom resources' do


KINDS: dict[str, _Kind] = {
    "pods": _Kind("pods", "/api/v1", "pods", "Pod", "v1", True),
    "events": _Kind("events", "/api/v1", "events", "Event", "v1", True),
    "podgroups": _Kind("podgroups", "/apis/scheduling.sigs.k8s.io/v1alpha1", "podgroups",
                       "PodGroup", "scheduling.sigs.k8s.io/v1alpha1", False),
    "events.k8s.io": _Kind("events.k8s.io", "/apis/events.k8s.io/v1", "events", "Event",
                           "events.k8s.io/v1", True),
    "nodes": _Kind("nodes", "/api/v1", "nodes", "Node", "v1", True),
}
_ALIASES = {"pod": "pods", "podgroup": "podgroups", "event": "events", "node": "nodes"}


def kind_key(kind: str, api_version: str | None = None) -> str:
    """Normalise ``Pod``/``pods``/``PodGroup``/``Event`` (+ apiVersion) to a store key."""
    low = kind.lower()
    if low in ("event", "events") and api_version and api_version.startswith("events.k8s.io"):
        return "events.k8s.io"
    low = _ALIASES.get(low, low)
    if low not in KINDS:
        raise KeyError(f"unknown kind {kind!r}")
    return low


def _now_text() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _lookup(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _field_matches(obj: dict[str, Any], selector: str) -> bool:
    """``a.b=v``, ``a.b==v``, ``a.b!=v`` terms joined by ``,`` (all must hold)."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        negate = "!=" in term
        path, value = term.split("!=" if negate else ("==" if "==" in term else "="), 1)
        actual = _lookup(obj, path.strip())
        actual_text = "" if actual is None else str(actual)
        if (actual_text == value.strip()) == negate:
            return False
    return True


def _label_matches(labels: dict[str, str], selector: str) -> bool:
    """``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``."""
    terms: list[str] = []
    depth, current = 0, ""
    for ch in selector:  # split on commas outside parentheses
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    for term in filter(None, (t.strip() for t in terms)):
        if " notin " in term or " in " in term:
            key, rest = term.split(" notin " if " notin " in term else " in ", 1)
            values = {v.strip() for v in rest.strip().strip("()").split(",")}
            inside = labels.get(key.strip()) in values
            if inside == (" notin " in term):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge recursively, ``None`` deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def json_patch(target: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 JSON patch, operations ``add``, ``replace``, ``remove`` and ``test``.
    Raises ``ValueError`` on a bad path or a failed ``test``."""
    doc = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        kind = op["op"]
        if kind == "test":
            actual = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if actual != op.get("value"):
                raise ValueError(f"test failed at {op['path']}")
        elif isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, op["value"])
            elif kind == "replace":
                parent[index] = op["value"]
            elif kind == "remove":
                del parent[index]
        elif kind in ("add", "replace"):
            parent[last] = op["value"]
        elif kind == "remove":
            del parent[last]
        else:
            raise ValueError(f"unsupported op {kind!r}")
    return doc


@dataclass
class _Change:
    rv: int
    kind: str
    type: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None


@dataclass
class _Watch:
    kind: str
    namespace: str | None
    fields: str
    labels: str
    pos: int
    dropped: bool = False
    expired: bool = False
    sock: Any = None
    created: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class RequestAttributes:
    """What the authoriser sees of one request: ``verb``, API ``group`` (``""`` = core),
    ``resource`` (plural), ``namespace`` (``""`` when cluster-wide) and ``name`` (``""``)."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""


def request_attributes(method: str, path: str, query: dict[str, str]) -> RequestAttributes | None:
    """The RBAC attributes of a resource request (``None`` for a non-resource path), as
    kube-apiserver's ``RequestInfoFactory.NewRequestInfo`` derives them (``k8s.io/apiserver@v0.35.2``
    ``pkg/endpoints/request/requestinfo.go:129-260``; subresources are not modelled)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    if method == "GET":
        verb = "watch" if query.get("watch") in ("1", "true", "True") else (
            "get" if name else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection"}.get(method, method.lower())
    return RequestAttributes(verb, group, resource, namespace, name)


def rule_allows(rule: dict[str, Any], attrs: RequestAttributes) -> bool:
    """True when one RBAC PolicyRule (``apiGroups``, ``resources``, ``verbs``; ``*`` matches
    anything) covers ``attrs`` (kubernetes v1.35.2 ``plugin/pkg/auth/authorizer/rbac/rbac.go:178``
    ``RuleAllows``; ``resourceNames`` are not modelled)."""
    def has(key: str, value: str) -> bool:
        values = rule.get(key) or []
        return "*" in values or value in values
    return has("verbs", attrs.verb) and has("apiGroups", attrs.group) \
        and has("resources", attrs.resource)


def forbidden_status(attrs: RequestAttributes, user: str) -> dict[str, Any]:
    """kube-apiserver's 403 ``Status`` for a refused request: ``ForbiddenStatusError`` and
    ``forbiddenMessage`` (``k8s.io/apiserver@v0.35.2`` ``pkg/endpoints/handlers/responsewriters/
    errors.go:44-80``) wrapped by ``NewForbidden`` (``k8s.io/apimachinery@v0.35.2``
    ``pkg/api/errors/errors.go:209-229``), e.g. ``events "x" is forbidden: User "u" cannot get
    resource "events" in API group "" in the namespace "ns"``."""
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    what = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    where = f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    body = _status(403, "Forbidden", f'{what} is forbidden: User "{user}" cannot {attrs.verb} '
                                     f'resource "{attrs.resource}" in API group "{attrs.group}"'
                                     f'{where}')
    body["details"] = {"group": attrs.group, "kind": attrs.resource, "name": attrs.name}
    return body


class ApiServerDouble:
    """The test API server (a test double). Use as a context manager or ``start()``/``stop()``.

    ``crds``: serve ``podgroups`` (False: 404 as without the CRD). ``bookmark_interval``:
    seconds between BOOKMARK events on watches that allow them. ``first_rv``: the counter's
    start. ``tls``: ``(certificate file, key file)`` to serve HTTPS with that certificate
    (``url`` is then ``https://``). Thread-safe; the HTTP server runs in daemon threads on
    127.0.0.1.
    """

    def __init__(self, *, crds: bool = True, bookmark_interval: float = 0.2,
                 first_rv: int = 100, tls: tuple[str, str] | None = None) -> None:
        self.crds = crds
        self.tls = tls
        self.bookmark_interval = bookmark_interval
        self._rv = first_rv
        self._compacted = 0
        self._objects: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in KINDS}
        self._history: list[_Change] = []
        self._watches: list[_Watch] = []
        self._paused = False
        self._stalled = False
        self._refused = False
        self._stopping = False
        self._cond = threading.Condition()
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self._faults: list[tuple[str | None, int, str | None]] = []
        self._rules: list[dict[str, Any]] | None = None
        self._user = ""
        self.forbidden: list[RequestAttributes] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "ApiServerDouble":
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        if self.tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="apiserver-double", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End every watch and stop serving."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> "ApiServerDouble":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https://`` with ``tls``)."""
        assert self._server is not None, "not started"
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def configuration(self) -> Any:
        """A ``kubernetes.client.Configuration`` whose host is this double."""
        from kubernetes import client

        config = client.Configuration()
        config.host = self.url
        return config

    # -- Python API for tests ------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        """The current global resourceVersion."""
        with self._cond:
            return self._rv

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace ``obj`` (kind from ``kind``/``apiVersion``); returns the stored copy.

        The object is matched by ``metadata.uid`` when given, else by namespace and name; a new
        uid and ``creationTimestamp`` are filled in when missing; the resourceVersion is always
        the server's. Emits ADDED or MODIFIED to watches."""
        key = kind_key(obj.get("kind", ""), obj.get("apiVersion"))
        with self._cond:
            return self._put(key, copy.deepcopy(obj), allow_same_name=True)

    def delete(self, kind: str, namespace: str, name: str,
               uid: str | None = None) -> dict[str, Any]:
        """Delete an object (by uid when given, else the newest of that name); returns its last
        state, which carries the deletion's resourceVersion and a ``deletionTimestamp``.
        Raises ``KeyError`` when absent."""
        key = kind_key(kind)
        with self._cond:
            found = self._find(key, namespace, name, uid)
            if found is None:
                raise KeyError(f"{key} {namespace}/{name} not found")
            return self._remove(key, found)

    def compact(self, expire_watches: bool = False) -> int:
        """Expire every resourceVersion older than the current one (etcd compaction): watches
        and continue tokens from older versions get 410 Gone. With ``expire_watches``, every
        open watch also receives an ``ERROR`` event (Status code 410) and is closed. Returns the
        compaction revision."""
        with self._cond:
            self._compacted = self._rv
            self._history = [c for c in self._history if c.rv > self._rv]
            if expire_watches:
                for w in self._watches:
                    w.expired = True
            self._cond.notify_all()
            return self._compacted

    def drop_watches(self) -> int:
        """Cut every open watch connection without a clean end (as a dead load balancer would);
        returns how many were cut."""
        with self._cond:
            count = 0
            for w in self._watches:
                w.dropped = True
                count += 1
                if w.sock is not None:
                    try:
                        w.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            self._cond.notify_all()
            return count

    def pause_watches(self) -> None:
        """Stop delivering changes to watches (they stay open; bookmarks stop too)."""
        with self._cond:
            self._paused = True

    def resume_watches(self) -> None:
        """Deliver again what was held by ``pause_watches``."""
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def stall_watches(self, stalled: bool = True) -> None:
        """While set, open watches send nothing at all and outlive their ``timeoutSeconds``
        (a hung server, or a connection a middlebox silently dropped): only the client's read
        timeout ends them. Cleared, they end at once if their timeout has passed."""
        with self._cond:
            self._stalled = stalled
            self._cond.notify_all()

    def refuse_watches(self, refused: bool = True) -> None:
        """While set, new watch requests get 503 (lists still work)."""
        with self._cond:
            self._refused = refused

    def fail_next(self, status: int, count: int = 1, method: str | None = None,
                  retry_after: float | None = None) -> None:
        """Answer the next ``count`` requests (of ``method`` when given: ``GET``, ``POST``,
        ``PATCH``...) with a ``Status`` error of code ``status`` and, when ``retry_after`` is
        given, a ``Retry-After`` header (seconds). The requests are logged in ``requests`` and
        change nothing."""
        with self._cond:
            for _ in range(count):
                self._faults.append((method, status,
                                     None if retry_after is None else f"{retry_after:g}"))

    def allow_only(self, rules: list[dict[str, Any]] | None,
                   user: str = "system:serviceaccount:test:test") -> None:
        """Authorise every later HTTP request as RBAC would for ``user`` holding exactly
        ``rules`` (PolicyRule dicts: ``apiGroups``, ``resources``, ``verbs``): a request no rule
        covers is answered 403 Forbidden and appended to ``forbidden``. ``None`` serves every
        request again (the default)."""
        with self._cond:
            self._rules = None if rules is None else [dict(r) for r in rules]
            self._user = user

    def _unauthorized(self, method: str, path: str,
                      query: dict[str, str]) -> RequestAttributes | None:
        """The attributes of a request the rules of ``allow_only`` do not cover (else
        ``None``)."""
        with self._cond:
            rules = self._rules
            if rules is None:
                return None
            attrs = request_attributes(method, path, query)
            if attrs is None or any(rule_allows(r, attrs) for r in rules):
                return None
            self.forbidden.append(attrs)
            return attrs

    def _take_fault(self, method: str) -> tuple[int, str | None] | None:
        with self._cond:
            for i, (want, status, retry_after) in enumerate(self._faults):
                if want is None or want == method:
                    del self._faults[i]
                    return status, retry_after
            return None

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Deep copies of every stored object of ``kind``, sorted by namespace, name, uid."""
        key = kind_key(kind)
        with self._cond:
            items = sorted(self._objects[key].values(), key=_sort_key)
            return copy.deepcopy(items)

    def open_watches(self, kind: str | None = None) -> int:
        """How many watch connections are open (of ``kind`` when given)."""
        key = kind_key(kind) if kind else None
        with self._cond:
            return sum(1 for w in self._watches if key is None or w.kind == key)

    # -- store (callers hold self._cond) -------------------------------------------------------
    def _find(self, key: str, namespace: str, name: str,
              uid: str | None = None) -> dict[str, Any] | None:
        if uid is not None:
            obj = self._objects[key].get(uid)
            return obj if obj is not None and obj["metadata"].get("name") == name else None
        same = [o for o in self._objects[key].values()
                if o["metadata"].get("namespace", "") == namespace
                and o["metadata"].get("name") == name]
        return max(same, key=lambda o: int(o["metadata"]["resourceVersion"])) if same else None

    def _put(self, key: str, obj: dict[str, Any], *, allow_same_name: bool) -> dict[str, Any]:
        kind = KINDS[key]
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        meta = obj.setdefault("metadata", {})
        uid = meta.get("uid")
        taken = self._find(key, meta.get("namespace", ""), meta["name"])
        if not allow_same_name and taken is not None:  # create (POST)
            raise FileExistsError(meta["name"])
        prev = self._objects[key].get(uid) if uid else taken
        if prev is not None:
            meta["uid"] = prev["metadata"]["uid"]
            meta.setdefault("creationTimestamp", prev["metadata"].get("creationTimestamp"))
        else:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now_text())
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._objects[key][meta["uid"]] = obj
        self._record(key, "MODIFIED" if prev is not None else "ADDED", obj, prev)
        return copy.deepcopy(obj)

    def _remove(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        del self._objects[key][obj["metadata"]["uid"]]
        final = copy.deepcopy(obj)
        self._rv += 1
        final["metadata"]["resourceVersion"] = str(self._rv)
        final["metadata"].setdefault("deletionTimestamp", _now_text())
        self._record(key, "DELETED", final, obj)
        return copy.deepcopy(final)

    def _record(self, key: str, type_: str, obj: dict[str, Any],
                prev: dict[str, Any] | None) -> None:
        self._history.append(_Change(self._rv, key, type_, copy.deepcopy(obj),
                                     copy.deepcopy(prev) if prev is not None else None))
        self._cond.notify_all()

    def _matches(self, w: _Watch | None, obj: dict[str, Any] | None, namespace: str | None,
                 fields: str, labels: str) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata", {})
        if namespace and meta.get("namespace", "") != namespace:
            return False
        if fields and not _field_matches(obj, fields):
            return False
        return not labels or _label_matches(meta.get("labels") or {}, labels)


def _sort_key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))


def _encode_token(rv: int, after: tuple[str, str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "after": after}).encode()).decode()


def _decode_token(token: str) -> tuple[int, tuple[str, str, str]]:
    data = json.loads(base64.urlsafe_b64decode(token.encode()))
    return int(data["rv"]), tuple(data["after"])  # type: ignore[return-value]


def _make_handler(server: ApiServerDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms stall

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        # -- plumbing --------------------------------------------------------------------------
        def _send_json(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, reason: str, message: str) -> None:
            self._send_json(code, _status(code, reason, message))

        def _injected(self) -> bool:
            """Answer 403 when ``allow_only`` refuses the request, else with a fault queued by
            ``fail_next``, if any (the body is read first so the connection stays usable)."""
            if self._forbid():
                return True
            fault = server._take_fault(self.command)
            if fault is None:
                return False
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            split = urlsplit(self.path)
            server.requests.append((self.command, split.path, {}))
            code, retry_after = fault
            data = json.dumps(_status(code, "Injected", f"injected failure {code}")).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(data)
            return True

        def _forbid(self) -> bool:
            split = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
            attrs = server._unauthorized(self.command, split.path, query)
            if attrs is None:
                return False
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            server.requests.append((self.command, split.path, query))
            self._send_json(403, forbidden_status(attrs, server._user))
            return True

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"null")

        def _route(self) -> tuple[str, str | None, str | None, dict[str, str]] | None:
            split = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
            server.requests.append((self.command, split.path, query))
            for kind in KINDS.values():
                if not split.path.startswith(kind.prefix + "/"):
                    continue
                rest = split.path[len(kind.prefix) + 1:].strip("/").split("/")
                namespace = None
                if rest[0] == "namespaces" and len(rest) >= 3:
                    namespace, rest = rest[1], rest[2:]
                if rest[0] != kind.plural or len(rest) > 2:
                    continue
                if kind.key == "podgroups" and not server.crds:
                    return None
                return kind.key, namespace, rest[1] if len(rest) == 2 else None, query
            return None

        # -- verbs -----------------------------------------------------------------------------
        def do_GET(self) -> None:
            if self._injected():
                return
            route = self._route()
            if route is None:
                return self._error(404, "NotFound", "the server could not find the requested "
                                   "resource")
            key, namespace, name, query = route
            if name is not None:
                with server._cond:
                    obj = server._find(key, namespace or "", name)
                    body = copy.deepcopy(obj) if obj else None
                if body is None:
                    return self._error(404, "NotFound", f'{key} "{name}" not found')
                return self._send_json(200, body)
            if query.get("watch") in ("1", "true", "True"):
                return self._watch(key, namespace, query)
            return self._list(key, namespace, query)

        def _list(self, key: str, namespace: str | None, query: dict[str, str]) -> None:
            kind = KINDS[key]
            fields, labels = query.get("fieldSelector", ""), query.get("labelSelector", "")
            limit = int(query.get("limit") or 0)
            with server._cond:
                list_rv = server._rv
                after: tuple[str, str, str] | None = None
                if query.get("continue"):
                    try:
                        list_rv, after = _decode_token(query["continue"])
                    except (ValueError, KeyError):
                        return self._error(400, "BadRequest", "invalid continue token")
                    if list_rv < server._compacted:
                        return self._error(410, "Expired", "The provided continue parameter "
                                           "is too old to display a consistent list result.")
                items = sorted((o for o in server._objects[key].values()
                                if server._matches(None, o, namespace, fields, labels)),
                               key=_sort_key)
                if after is not None:
                    items = [o for o in items if _sort_key(o) > after]
                items = copy.deepcopy(items)
            token = ""
            if limit and len(items) > limit:
                items = items[:limit]
                token = _encode_token(list_rv, _sort_key(items[-1]))
            if kind.builtin:
                for item in items:
                    item.pop("kind", None)
                    item.pop("apiVersion", None)
            meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
            if token:
                meta["continue"] = token
            self._send_json(200, {"kind": kind.kind + "List", "apiVersion": kind.api_version,
                                  "metadata": meta, "items": items})

        def _watch(self, key: str, namespace: str | None, query: dict[str, str]) -> None:
            rv_text = query.get("resourceVersion", "")
            bookmarks = query.get("allowWatchBookmarks") in ("1", "true", "True")
            timeout = float(query.get("timeoutSeconds") or 0) or None
            w = _Watch(key, namespace, query.get("fieldSelector", ""),
                       query.get("labelSelector", ""), 0, sock=self.connection)
            initial: list[dict[str, Any]] = []
            with server._cond:
                if server._refused:
                    return self._error(503, "ServiceUnavailable", "watches refused (test)")
                if rv_text in ("", "0"):
                    w.pos = server._rv
                    initial = [{"type": "ADDED", "object": copy.deepcopy(o)}
                               for o in sorted(server._objects[key].values(), key=_sort_key)
                               if server._matches(w, o, namespace, w.fields, w.labels)]
                else:
                    try:
                        w.pos = int(rv_text)
                    except ValueError:
                        return self._error(400, "BadRequest", "invalid resourceVersion")
                    if w.pos < server._compacted:
                        return self._error(410, "Expired", f"too old resource version: "
                                           f"{w.pos} ({server._compacted})")
                server._watches.append(w)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for event in initial:
                    self._chunk(event)
                self._stream(w, bookmarks, timeout)
            except OSError:
                pass
            finally:
                with server._cond:
                    server._watches.remove(w)
                self.close_connection = True

        def _chunk(self, event: dict[str, Any]) -> None:
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _stream(self, w: _Watch, bookmarks: bool, timeout: float | None) -> None:
            deadline = None if timeout is None else time.monotonic() + timeout
            next_bookmark = time.monotonic() + server.bookmark_interval
            while True:
                with server._cond:
                    pending: list[dict[str, Any]] = []
                    while True:
                        now = time.monotonic()
                        if w.dropped or server._stopping:
                            break
                        if w.expired:
                            break
                        if server._stalled:
                            server._cond.wait(0.05)
                            continue
                        if deadline is not None and now >= deadline:
                            break
                        if not server._paused:
                            pending = self._pending(w)
                            if pending or (bookmarks and now >= next_bookmark):
                                break
                        waits = [next_bookmark - now] if bookmarks else [1.0]
                        if deadline is not None:
                            waits.append(deadline - now)
                        server._cond.wait(max(0.01, min(waits)))
                    dropped, expired = w.dropped or server._stopping, w.expired
                    current_rv = server._rv
                if dropped:
                    # no terminating chunk: the client sees a broken stream
                    raise ConnectionAbortedError("dropped by the test")
                if expired:
                    self._chunk({"type": "ERROR", "object": _status(
                        410, "Expired", f"too old resource version: {w.pos} "
                        f"({server._compacted})")})
                    break
                if deadline is not None and time.monotonic() >= deadline and not pending:
                    break
                for event in pending:
                    self._chunk(event)
                if not pending and bookmarks and time.monotonic() >= next_bookmark:
                    w.pos = max(w.pos, current_rv)
                    kind = KINDS[w.kind]
                    self._chunk({"type": "BOOKMARK", "object": {
                        "kind": kind.kind, "apiVersion": kind.api_version,
                        "metadata": {"resourceVersion": str(w.pos)}}})
                    next_bookmark = time.monotonic() + server.bookmark_interval
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _pending(self, w: _Watch) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for change in server._history:
                if change.rv <= w.pos or change.kind != w.kind:
                    continue
                now_in = server._matches(w, change.obj, w.namespace, w.fields, w.labels)
                was_in = server._matches(w, change.prev, w.namespace, w.fields, w.labels)
                if change.type == "DELETED":
                    type_ = "DELETED" if was_in or now_in else None
                elif now_in:
                    type_ = change.type if was_in or change.type == "ADDED" else "ADDED"
                else:
                    type_ = "DELETED" if was_in else None
                if type_ is not None:
                    out.append({"type": type_, "object": copy.deepcopy(change.obj)})
            if server._history:
                w.pos = max(w.pos, server._history[-1].rv)
            return out

        def do_POST(self) -> None:
            if self._injected():
                return
            route = self._route()
            if route is None or route[2] is not None:
                return self._error(404, "NotFound", "not found")
            key, namespace, _, _ = route
            obj = self._body()
            meta = obj.setdefault("metadata", {})
            if namespace:
                meta["namespace"] = namespace
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            if not meta.get("name"):
                return self._error(422, "Invalid", "metadata.name: Required value")
            meta.pop("uid", None)
            meta.pop("resourceVersion", None)
            with server._cond:
                try:
                    stored = server._put(key, obj, allow_same_name=False)
                except FileExistsError:
                    return self._error(409, "AlreadyExists",
                                       f'{key} "{meta["name"]}" already exists')
            self._send_json(201, stored)

        def _existing(self) -> tuple[str, dict[str, Any]] | None:
            route = self._route()
            if route is None or route[2] is None:
                self._error(404, "NotFound", "not found")
                return None
            key, namespace, name, _ = route
            obj = server._find(key, namespace or "", name)
            if obj is None:
                self._error(404, "NotFound", f'{key} "{name}" not found')
                return None
            return key, obj

        def do_PUT(self) -> None:
            self._update(patch=False)

        def do_PATCH(self) -> None:
            self._update(patch=True)

        def _update(self, patch: bool) -> None:
            """PUT (the body replaces the object) or PATCH (the body is a JSON patch, a list, or
            else a merge patch) of an existing object; the stored one keeps its uid. Answers
            200 with what was stored, 404 when there is no such object, 422 when a patch
            cannot be applied."""
            if self._injected():
                return
            body = self._body()
            with server._cond:
                found = self._existing()
                if found is None:
                    return
                key, obj = found
                if patch:
                    try:
                        new = (json_patch(obj, body) if isinstance(body, list)
                               else merge_patch(obj, body))
                    except (ValueError, KeyError, IndexError) as err:
                        return self._error(422, "Invalid", f"patch failed: {err}")
                else:
                    new = body
                    new.setdefault("metadata", {})
                new["metadata"]["uid"] = obj["metadata"]["uid"]
                stored = server._put(key, new, allow_same_name=True)
            self._send_json(200, stored)

        def do_DELETE(self) -> None:
            if self._injected():
                return
            with server._cond:
                found = self._existing()
                if found is None:
                    return
                key, obj = found
                final = server._remove(key, obj)
            self._send_json(200, final)

    return Handler


def eventually(predicate: Callable[[], Any], timeout: float = 10.0,
               interval: float = 0.01) -> Any:
    """Poll ``predicate`` until it returns a truthy value (bounded polling for tests); return
    it. Raises ``AssertionError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)
