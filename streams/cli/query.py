"""``gangstate get gangs``, ``gangstate describe gang``, ``gangstate explain pod``: the query
commands, in the style of kubectl.

Where it sits: the CLI shell of the read side. Each command gets its documents either from a
running worker's HTTP views (``--server URL``, default ``$GANGSTATE_SERVER`` or
``http://127.0.0.1:6066``; see ``streams.worker.web``) or from the offline fold of traces
(``--from TRACE``, repeatable, state as of ``--at``), and prints them as aligned tables and
sections for people or, with ``-o json``, exactly as the worker serves them. The documents come
from ``streams.query.answers``' builders over ``streams.core`` (``summary``, ``findings``,
``why_pod``); this module only formats.

Exit status: 0 on success, 1 when the gang or pod is unknown, 2 when the worker cannot be
reached (or answers with an error) or a trace cannot be read.

Must not: explain or decide anything itself, or import Faust.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence
from urllib.parse import quote

DEFAULT_SERVER = "http://127.0.0.1:6066"
NONE = "<none>"


class QueryError(Exception):
    """A query that cannot be answered: ``status`` is the exit status (1 unknown gang or pod,
    2 worker unreachable or failing, trace unreadable); ``str(err)`` the message for people."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


# -- sources: a worker's views, or the offline fold -------------------------------------------

class ServerSource:
    """Documents from a running worker's HTTP views at ``base`` (``http://host:port``).

    Every method raises ``QueryError`` (1 on a 404, 2 when the worker is unreachable, times out
    after ``timeout`` seconds, or answers anything else but 200).
    """

    def __init__(self, base: str, timeout: float = 10.0) -> None:
        self.base = base.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        import requests

        url = self.base + path
        try:
            resp = requests.get(url, params={k: v for k, v in (params or {}).items() if v},
                                timeout=self.timeout)
        except requests.RequestException as err:
            raise QueryError(f"cannot reach the gangstate worker at {self.base}: "
                             f"{type(err).__name__} (start one with `gangstate worker "
                             f"--web-port PORT`, or set --server / GANGSTATE_SERVER)", 2) from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if resp.status_code == 404 and error:
            raise QueryError(error, 1)
        if resp.status_code != 200 or body is None:
            raise QueryError(f"the gangstate worker at {self.base} answered {resp.status_code} "
                             f"for {path}: {error or resp.text[:200]}", 2)
        return body

    def gangs(self, namespace: str | None, phase: str | None) -> list[dict[str, Any]]:
        """``GET /gangs``: rows of ``streams.query.answers.gang_row``."""
        return self._get("/gangs", {"namespace": namespace or "", "phase": phase or ""})["gangs"]

    def gang(self, gang: str) -> dict[str, Any]:
        """``GET /gangs/{ns}/{name}``: ``streams.query.answers.gang_detail``."""
        ns, name = _split(gang)
        return self._get(f"/gangs/{quote(ns, safe='')}/{quote(name, safe='')}")

    def why(self, pod: str, gang: str | None) -> dict[str, Any]:
        """``GET /pods/{ns}/{name}/why``: ``streams.core.explain.why_pod``."""
        ns, name = _split(pod)
        return self._get(f"/pods/{quote(ns, safe='')}/{quote(name, safe='')}/why",
                         {"gang": gang or ""})


class TraceSource:
    """Documents from the offline fold of ``traces`` (merged by ``observed_at``, as the worker
    sees them) as of ``at`` (microseconds of event time): records after ``at`` are left out and
    the fold ends with a tick at ``at``. Raises ``QueryError`` (2) when a trace is unreadable;
    malformed lines are reported on stderr and skipped, as ``gangstate fold`` does."""

    def __init__(self, traces: Sequence[str], at: int) -> None:
        from streams.wire.traces import fold_lines

        lines = _lines_until([Path(t) for t in traces], at)
        result = fold_lines(((n, raw) for _, n, raw in lines), at)
        for number, error in result.errors:
            print(f"line {number}: skipped malformed record: {error}", file=sys.stderr)
        self.states = result.states

    def gangs(self, namespace: str | None, phase: str | None) -> list[dict[str, Any]]:
        """``streams.query.answers.gang_rows`` of the folded gangs; a bad phase is ``QueryError`` 2."""
        from streams.query.answers import gang_rows

        try:
            return gang_rows(self.states.values(), namespace, phase)
        except ValueError as err:
            raise QueryError(str(err), 2) from None

    def gang(self, gang: str) -> dict[str, Any]:
        """``streams.query.answers.gang_detail``; an unknown gang is ``QueryError`` 1."""
        from streams.query.answers import gang_detail

        state = self.states.get(gang)
        if state is None:
            raise QueryError(f"gang {gang} not found", 1)
        return gang_detail(state)

    def why(self, pod: str, gang: str | None) -> dict[str, Any]:
        """``streams.query.answers.explain_pod``; an unknown gang or pod is ``QueryError`` 1."""
        from streams.query.answers import NotFound, explain_pod

        try:
            return explain_pod(self.states, pod, gang)
        except NotFound as err:
            raise QueryError(str(err), 1) from None


def _lines_until(paths: list[Path], at: int) -> list[tuple[str, int, bytes]]:
    from producers.replay import merged_by_time

    from streams.core.timefmt import parse_time

    try:
        lines = merged_by_time(paths)
    except OSError as err:
        raise QueryError(f"cannot read {err.filename}: {err.strerror}", 2) from None

    def due(raw: bytes) -> bool:
        try:
            return parse_time(json.loads(raw)["observed_at"]) <= at
        except Exception:
            return True  # malformed: the decoder reports it with its line number
    return [line for line in lines if due(line[2])]


def _split(name: str) -> tuple[str, str]:
    ns, sep, rest = name.partition("/")
    if not sep or not ns or not rest or "/" in rest:
        raise QueryError(f"{name!r} is not NAMESPACE/NAME", 2)
    return ns, rest


def _ref(text: str) -> str:
    """argparse type of a ``NAMESPACE/NAME`` argument."""
    try:
        _split(text)
    except QueryError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _source(args: argparse.Namespace) -> ServerSource | TraceSource:
    if args.traces:
        from streams.cli.options import _at

        return TraceSource(args.traces, _at(args.at))
    return ServerSource(args.server or os.environ.get("GANGSTATE_SERVER") or DEFAULT_SERVER)


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


def _fields(pairs: Sequence[tuple[str, Any]], indent: str = "") -> str:
    width = max(len(k) for k, _ in pairs) + 2
    return "".join(f"{indent}{(k + ':').ljust(width)}{_cell(v)}\n" for k, v in pairs)


def format_gangs(rows: list[dict[str, Any]]) -> str:
    """``get gangs``: one line per gang, ``MEMBERS`` as ``members/min_member``."""
    return table(("NAMESPACE", "NAME", "PHASE", "MEMBERS", "BOUND", "WAITING",
                  "REPRESENTATIVE"),
                 ([r["namespace"], r["name"], r["phase"],
                   f"{r['members']}/{'?' if r['min_member'] is None else r['min_member']}",
                   r["bound"], r["waiting"], r["representative"]] for r in rows))


def format_gang(doc: dict[str, Any]) -> str:
    """``describe gang``: the spec and counts, the pods, the open findings, the history."""
    ns, name = _split(doc["gang"])
    waiting = doc["waiting_seconds"]
    deleted = [("Deleted", doc["deleted"])] if doc.get("deleted") else []
    out = _fields([
        ("Name", name), ("Namespace", ns), ("Phase", doc["phase"]), *deleted,
        ("Gang group", doc["gang_group"]), ("Spec from", doc["spec_source"]),
        ("PodGroup", doc["podgroup"]), ("Min member", doc["min_member"]),
        ("Total number", doc["total_number"]), ("Mode", doc["mode"]),
        ("Waiting time", None if waiting is None else f"{waiting}s"),
        ("Members", f"{doc['members']} ({doc['bound']} bound, {doc['waiting']} waiting at "
                    f"Permit)"),
        ("Representative", doc["representative"]), ("Epoch", doc["epoch"]),
        ("Last cycle", doc["last_cycle"]),
    ])
    out += "Pods:\n"
    pods = doc["pods"]
    out += table(("NAME", "PHASE", "NODE", "CYCLE", "STAGE", "STATUS", "REASON"),
                 ([pod.split("/", 1)[1], p["phase"], p["node"], p["cycle"], p["stage"],
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
    out = _fields([
        ("Pod", doc["pod"]), ("Phase", doc["phase"]), ("Node", doc["node"]),
        ("Gang", f"{doc['gang']} ({doc['gang_phase']}: {g['members']} of minMember "
                 f"{min_member} pods, {g['bound']} bound, {g['waiting']} waiting at Permit)"),
        ("Representative", g["representative"]),
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

def _emit(args: argparse.Namespace, doc: Any, text: str) -> None:
    if args.output == "json":
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text)


def _run(args: argparse.Namespace, fn: Any) -> int:
    try:
        fn(_source(args))
    except QueryError as err:
        print(f"gangstate {args.command}: {err}", file=sys.stderr)
        return err.status
    return 0


def cmd_get_gangs(args: argparse.Namespace) -> int:
    """``gangstate get gangs [-n NS] [--phase P]``: list gangs (exit 0, even when none)."""
    def run(src: ServerSource | TraceSource) -> None:
        rows = src.gangs(args.namespace, args.phase)
        if not rows and args.output != "json":
            where = f" in namespace {args.namespace}" if args.namespace else ""
            print(f"No gangs found{where}.", file=sys.stderr)
            return
        _emit(args, {"gangs": rows}, format_gangs(rows))
    return _run(args, run)


def cmd_describe_gang(args: argparse.Namespace) -> int:
    """``gangstate describe gang NS/NAME``: one gang in detail (exit 1 when unknown)."""
    def run(src: ServerSource | TraceSource) -> None:
        doc = src.gang(args.name)
        _emit(args, doc, format_gang(doc))
    return _run(args, run)


def cmd_explain_pod(args: argparse.Namespace) -> int:
    """``gangstate explain pod NS/NAME [--gang NS/NAME]``: why the pod is pending and what
    would unblock it (exit 1 when the pod or gang is unknown)."""
    def run(src: ServerSource | TraceSource) -> None:
        doc = src.why(args.name, args.gang)
        _emit(args, doc, format_why(doc))
    return _run(args, run)


def _source_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default=None,
                   help=f"URL of a worker's views (`gangstate worker --web-port PORT`); default "
                        f"$GANGSTATE_SERVER or {DEFAULT_SERVER}")
    p.add_argument("--from", dest="traces", action="append", metavar="TRACE",
                   help="answer from the offline fold of this trace instead of a worker "
                        "(repeatable: traces are merged by observed_at)")
    p.add_argument("--at", default=None,
                   help="with --from: the state as of this RFC 3339 time (records after it are "
                        "left out; default: now)")
    p.add_argument("--output", "-o", choices=("text", "json"), default="text",
                   help="text: tables for people (default); json: the worker's documents")


def add_command(subparsers: Any) -> None:
    """Register ``get``, ``describe`` and ``explain`` on the ``gangstate`` subparsers."""
    p = subparsers.add_parser("get", help="list gangs (kubectl get style)",
                              description="List gangs with their phase and counts.")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    k = kinds.add_parser("gangs", aliases=["gang"], help="gangs, sorted by id",
                         description="One line per gang: phase, members/minMember, bound, "
                                     "waiting at Permit, representative. Deleted gangs are "
                                     "left out unless --phase Deleted asks for them.")
    k.add_argument("--namespace", "-n", default=None, help="only gangs of this namespace")
    k.add_argument("--phase", default=None,
                   help="only gangs in this phase (NotInitialized, Gathering, Ready, "
                        "Scheduling, Scheduled, Finished, Deleted)")
    _source_flags(k)
    k.set_defaults(func=cmd_get_gangs)

    p = subparsers.add_parser("describe", help="describe a gang (kubectl describe style)",
                              description="Show one gang: spec, counts, pods, open findings, "
                                          "history.")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    k = kinds.add_parser("gang", aliases=["gangs"], help="one gang",
                         description="Show one gang: spec, counts, pods, open findings, "
                                     "history. Exit 1 when the gang is unknown.")
    k.add_argument("name", type=_ref, metavar="NAMESPACE/NAME")
    _source_flags(k)
    k.set_defaults(func=cmd_describe_gang)

    p = subparsers.add_parser("explain", help="explain why a pod is pending",
                              description="Say why a gang pod is pending and what would "
                                          "unblock it.")
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    k = kinds.add_parser("pod", aliases=["pods"], help="one pod",
                         description="Why pod NAMESPACE/NAME is pending (held at PreEnqueue, "
                                     "waiting at Permit, failed its cycle) and what would "
                                     "unblock it. Exit 1 when the pod is not a live member of "
                                     "a known gang.")
    k.add_argument("name", type=_ref, metavar="NAMESPACE/NAME")
    k.add_argument("--gang", type=_ref, default=None, metavar="NAMESPACE/NAME",
                   help="the pod's gang (default: the gang whose members include the pod)")
    _source_flags(k)
    k.set_defaults(func=cmd_explain_pod)
