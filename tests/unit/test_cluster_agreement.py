"""The offline half of the cluster tier's agreement check (``tests.cluster.kube.fold_said``):
diagnostics reduced to the Events the sink leaves, per involved object, through the sink's own
``Recorder``. Worked out by hand for a gang that is held, then completed and scheduled
(min-available 3; p0, p1 at t=0, p2 at t=12, all bound at t=13; grace 10 s)."""

from __future__ import annotations

from tests.cluster.kube import fold_said
from tests.fixtures.builders import fold_records, pod

HELD = "gang ns/g has 2 of minMember 3 pods; scheduling is held at PreEnqueue until 1 more exists"
SATISFIED = "gang ns/g has 3 of minMember 3 pods; no longer held at PreEnqueue"
SCHEDULED = "gang ns/g is scheduled: 3 of minMember 3 pods bound"


def diagnostics(with_late_member: bool = True) -> list[dict]:
    records = [pod("p0", 0, min_available="3"), pod("p1", 0, min_available="3")]
    if with_late_member:
        records += [pod("p2", 12, min_available="3")]
        records += [pod(n, 13, rv="2", type_="MODIFIED", node="n1", min_available="3")
                    for n in ("p0", "p1", "p2")]
    return [o for o in fold_records(records, 30) if o["schema"] == "gangstate.diagnostic/v1"]


def test_each_object_keeps_one_event_per_reason_with_its_latest_message() -> None:
    said = fold_said(diagnostics())
    early = [("Normal", "GangMembersSatisfied", SATISFIED), ("Normal", "GangScheduled", SCHEDULED),
             ("Warning", "GangMembersInsufficient", HELD)]
    assert said == {("Pod", "p0", "uid-p0"): early, ("Pod", "p1", "uid-p1"): early,
                    ("Pod", "p2", "uid-p2"): early[:2]}


def test_a_gang_still_held_keeps_only_its_warning() -> None:
    said = fold_said(diagnostics(with_late_member=False))
    assert said == {("Pod", name, f"uid-{name}"): [("Warning", "GangMembersInsufficient", HELD)]
                    for name in ("p0", "p1")}
