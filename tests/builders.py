"""Small builders of core records for table-driven tests (times in seconds for readability)."""

from __future__ import annotations

from streams.core.records import AckObserved, CycleObserved, PodGroupObserved, PodObserved
from streams.core.spec import RawSettings

T0 = 1_700_000_000_000_000  # an arbitrary event time, microseconds


def at(seconds: float) -> int:
    """Event time ``seconds`` after ``T0``, in microseconds."""
    return T0 + int(seconds * 1_000_000)


def pod(name: str, t: float, *, uid: str | None = None, rv: str = "1", type_: str = "ADDED",
        gang: str = "ns/g", min_available: str | None = "2", node: str | None = None,
        phase: str = "Pending", waits_for_podgroup: bool = False, gates: tuple[str, ...] = (),
        **settings: str) -> PodObserved:
    """A gang member pod event; ``gates`` are its scheduling gates' names, ``settings`` other
    RawSettings fields as written."""
    ns = gang.split("/")[0]
    return PodObserved(at(t), type_, gang, ns, name, uid or f"uid-{name}", rv, node, phase, False,
                       RawSettings(min_available=min_available, **settings), waits_for_podgroup,
                       gates)


def podgroup(t: float, min_member: int | None = 2, *, name: str = "g", rv: str = "1",
             type_: str = "ADDED", timeout: int | None = None, ns: str = "ns") -> PodGroupObserved:
    """A PodGroup event (``scheduleTimeoutSeconds`` as ``timeout``)."""
    return PodGroupObserved(at(t), type_, f"{ns}/{name}", ns, name, f"uid-pg-{name}", rv,
                            RawSettings(None if min_member is None else str(min_member),
                                        waiting_time=None if timeout is None else f"{timeout}s"))


def cycle(pod_name: str, t: float, cycle_no: int, stage: str, status: str, *, reason: str = "",
          representative: str | None = None, gang: str = "ns/g") -> CycleObserved:
    """A cycle record for member ``pod_name`` of ``gang``."""
    ns = gang.split("/")[0]
    return CycleObserved(at(t), "koord-scheduler", cycle_no, f"{ns}/{pod_name}",
                         f"uid-{pod_name}", gang, gang, stage, status, reason, "",
                         representative, None)


def ack(t: float, epoch: int, outcome: str, representative: str | None,
        group: str = "ns/g") -> AckObserved:
    """A shim ack of command ``<group>#<epoch>``."""
    return AckObserved(at(t), f"{group}#{epoch}", group, epoch, outcome, representative)


def attempt(pod_name: str, t: float, event_uid: str, stage: str, status: str, *,
            count: int = 1, reason: str = "", gang: str = "ns/g") -> CycleObserved:
    """A cycle record derived from a scheduler Event: no cycle number (``None``), identified by
    the Event's uid and count (``<uid>#<count>``, as ``streams.wire.decoding`` builds it)."""
    ns = gang.split("/")[0]
    return CycleObserved(at(t), "koord-scheduler", None, f"{ns}/{pod_name}", f"uid-{pod_name}",
                         gang, gang, stage, status, reason, "", None, None,
                         f"{event_uid}#{count}")
