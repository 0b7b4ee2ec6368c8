"""Scheduler Events -> what happened to one gang member in one attempt (pure parsing).

Where it sits: the watch producer (``producers.watch``) sees core/v1 Events whose reason is
``FailedScheduling`` or ``Scheduled`` and hands their ``reason`` and ``message`` here; the
``Outcome`` it gets back becomes the stage, status, reason, culprit, fit error and
``alreadyWaitForBound`` of a ``gangstate.cycle/v1`` record. Pure computation over strings: no
I/O, no clock, no Kafka or Kubernetes imports.

``CATALOGUE`` is the one table of every message koord-scheduler v1.8.0 (kube-scheduler v1.35.2
inside) and kube-scheduler v1.37.2's own gang scheduling (GangScheduling, the ``GS*`` rows) can
write into a scheduling Event, each row with its source (K =
``koordinator@v1.8.0/pkg/scheduler/plugins/coscheduling/``, KS = ``kubernetes@v1.35.2/
pkg/scheduler/``, KS137 = ``kubernetes@v1.37.2/pkg/scheduler/``) and what it means for the pod;
``parse_scheduler_event`` is the one reader. kube-scheduler writes its Events as its profile,
``default-scheduler``; the framing below is the same in v1.37.2 (KS137
``framework/types.go:1470-1520``).
How kube-scheduler frames a message (KS ``framework/types.go:806-857`` ``FitError.Error``):
``0/N nodes are available:`` then, for a PreFilter refusal, `` <status message>.``; else the
node histogram `` <count> <reason>, ... .`` sorted as strings; then the PostFilter message
(`` preemption: ...`` from DefaultPreemption or Koordinator, KS
``framework/plugins/defaultpreemption/default_preemption.go:129``, K ``core/core.go:349-356``;
with DynamicResources before it, ``no new claims to deallocate, preemption: ...``, KS
``framework/plugins/dynamicresources/dynamicresources.go:790``, the PostFilter reasons joined by
``, ``). A member released while waiting at Permit gets a fit error of one node whose reason is
the reject message: ``0/1 nodes are available: 1 <message>.`` (KS ``schedule_one.go:302-314``).
An Event message longer than 1024 bytes is cut to 1020 and `` ...`` appended (KS
``schedule_one.go:1108,1121-1129``): rows still match the cut text, the fields after the cut
are unknown (``truncated``).

Must not: decide anything about gangs; a message it cannot read still yields an outcome
(status ``Unschedulable``, reason = the Event reason, ``parsed`` false), never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streams.wire.contracts import CycleStatus, Stage

REASON_GANG_GROUP_REJECTED = "GangGroupRejected"
"""A member refused or released because another member of its gang group did not fit."""
REASON_GANG_REJECTED = "GangRejected"
"""Koordinator's own PostFilter status (thrown away by the plugin wrapper in v1.8.0)."""
REASON_BASIC_CHECK = "GangBasicCheckUnsatisfied"
"""A member refused because a gang of its group has too few member pods (basic check)."""
REASON_CYCLE_INVALID = "GangScheduleCycleInvalid"
REASON_PERMIT_TIMEOUT = "PermitTimeout"
REASON_UNRESERVE = "GangUnreserve"
REASON_ROUND_ENDED = "GangRoundEnded"
"""A member that fit and waited at Permit, released because the round handed out every pending
member without the gang group being complete (``all pending pods is already been attempted``)."""
REASON_GANG_NOT_FOUND = "GangNotFound"
REASON_GANG_NOT_INITIALIZED = "GangNotInitialized"
REASON_GANG_DELETED = "GangDeleted"
REASON_GANG_SCHEDULING = "GangGroupScheduling"
REASON_REPRESENTATIVE = "GangRepresentative"
REASON_NO_TOPOLOGY = "NoClusterNetworkTopology"
REASON_PREEMPTED = "GangPreempted"
REASON_PREEMPTION = "GangPreemption"
REASON_MIN_COUNT_UNSATISFIABLE = "GangMinCountUnsatisfiable"
"""A native gang's member refused in a pod-group scheduling cycle because the gang cannot reach
its ``minCount`` (kube-scheduler v1.37.2 GangScheduling ``PlacementFeasible``: too few members
fit or are left to try)."""
REASON_MIN_COUNT_NOT_YET = "GangMinCountNotYetSatisfied"
"""A native gang's member refused because the pod-group cycle ended with the gang's
``minCount`` not yet reached (a ``PlacementFeasible`` wait turned into a refusal)."""
REASON_GANG_WAIT = "GangWaitingForMinCount"
"""A native gang's member that fits and waits at Permit for ``minCount`` members to be
scheduled (GangScheduling ``Permit``, at most 5 minutes)."""
REASON_NATIVE_PREENQUEUE = "GangNotReadyForScheduling"
"""A native gang's member refused at PreEnqueue (its PodGroup missing, too few pods, a
CompositePodGroup tree short of its quorum): kube-scheduler writes no Event for it."""
REASON_PODGROUP_INVALID = "PodGroupValidationFailed"
"""A native gang's pods refused before the pod-group cycle ran, as a scheduler error, because
they disagree with each other or with their PodGroup (scheduler name, priority, preemption
policy: kube-scheduler v1.37.2 ``validatePodGroup``)."""
REASON_HELD = "GangHeld"
"""gangstate's own hold: the scheduler shim refused the pod because gangstate holds its gang
group (a ``HoldGang``, streams/core/rules/holding.py); the name of gangstate's reason for it."""
HOLD_PREFIX = "gangstate holds gang group "
"""How the scheduler shim's refusal of a held pod begins: ``gangstate holds gang group
<group>: <message>`` (docs/shim.md)."""

TRUNCATED_SUFFIX = " ..."
NOTE_LENGTH_LIMIT = 1024
"""kube-scheduler's cut of an Event message (KS ``schedule_one.go:1121-1129``,
``validation.NoteLengthLimit``)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one scheduler Event says about its pod in one scheduling attempt.

    ``stage``/``status`` use the ``gangstate.cycle/v1`` vocabulary; ``reason`` is the short
    cause (``Insufficient nvidia.com/gpu``, ``GangGroupRejected``...); ``culprit`` is the member
    whose failure to fit caused this outcome, as ``ns/name`` (the pod itself for its own fit
    error), or ``None``; ``fit_error`` the culprit's fit error as the scheduler wrote it, without
    PostFilter text (``0/2 nodes are available: 2 Insufficient nvidia.com/gpu.``; possibly cut
    short when ``truncated``), or ``None``; ``already_wait_for_bound`` the members of the gang
    group that waited at Permit when the culprit failed (Koordinator's count), or ``None``;
    ``node`` the node a ``Scheduled`` Event assigned the pod to; ``form`` the ``CATALOGUE`` row
    that matched (``""`` for none); ``truncated`` true when the message was cut at 1024 bytes;
    ``attempt`` false for an Event that reports no scheduling attempt (``skip schedule deleting
    pod``); ``parsed`` false when no row matched and the outcome is the generic fallback.
    """

    stage: Stage
    status: CycleStatus
    reason: str
    culprit: str | None = None
    node: str | None = None
    parsed: bool = True
    form: str = ""
    fit_error: str | None = None
    already_wait_for_bound: int | None = None
    truncated: bool = False
    attempt: bool = True


@dataclass(frozen=True, slots=True)
class Form:
    """One row of the catalogue: ``id`` (brief table C's name, or ``FIT``/``FIT-PERMIT``), the
    format as the source writes it, where (file:line), and the outcome's stage, status and
    reason (``reason`` ``*`` = the dominant node reason of the fit error)."""

    id: str
    format: str
    source: str
    stage: Stage
    status: CycleStatus
    reason: str


CATALOGUE: tuple[Form, ...] = (
    Form("E1", "Successfully assigned %v/%v to %v", "KS schedule_one.go:1019",
         "Bind", "Bound", ""),
    Form("E2", "skip schedule deleting pod: %v/%v", "KS schedule_one.go:399-404",
         "PreFilter", "UnschedulableAndUnresolvable", "PodDeleting"),
    Form("G1", "0/%d nodes are available: gangstate holds gang group %s: %s. [PostFilter text]",
         "KS schedule_one.go:493-507; KS framework/types.go:806-814; koordinator@v1.8.0 "
         "pkg/scheduler/frameworkext/framework_extender.go:278-291 (the text: gangstate's "
         "shim at BeforePreFilter, docs/shim.md; its PreEnqueue refusal is only logged, KS "
         "backend/queue/scheduling_queue.go:602-623)",
         "PreFilter", "UnschedulableAndUnresolvable", REASON_HELD),
    Form("F4", "<any form> cut at 1024 bytes, ending ' ...'", "KS schedule_one.go:1108,1121-1129",
         "Filter", "Unschedulable", "(the form cut)"),
    Form("B2", "0/%d nodes are available: GangGroup %q gets rejected due to member Pod %q is "
               "unschedulable with reason %q, alreadyWaitForBound: %d. [PostFilter text]",
         "K core/core.go:336-339,414; K coscheduling.go:148-155; KS framework/types.go:810-814",
         "PreFilter", "UnschedulableAndUnresolvable", REASON_GANG_GROUP_REJECTED),
    Form("F3", "0/1 nodes are available: 1 GangGroup %q gets rejected due to member Pod %q is "
               "unschedulable with reason %q, alreadyWaitForBound: %d.",
         "K core/core.go:376-378,414,489-503; KS schedule_one.go:302-314",
         "PostFilter", "Rejected", REASON_GANG_GROUP_REJECTED),
    Form("F5", "0/1 nodes are available: 1 gets rejected due to member pod %q is unschedulable.",
         "K core/core.go:388-391,376-378; KS schedule_one.go:302-314",
         "PostFilter", "Rejected", REASON_GANG_GROUP_REJECTED),
    Form("U1", "0/1 nodes are available: 1 Gang %q gets rejected due to Pod %q in Unreserve.",
         "K core/core.go:456-475,489-503; KS schedule_one.go:302-314",
         "Unreserve", "Rejected", REASON_GANG_GROUP_REJECTED),
    Form("N1", "0/1 nodes are available: 1 all pending pods is already been attempted.",
         "K core/core.go:186-187; K core/gang_context.go:35; KS schedule_one.go:302-314",
         "Permit", "Rejected", REASON_ROUND_ENDED),
    Form("N2", "0/1 nodes are available: 1 gang is nil, may be already deleted.",
         "K core/core.go:158-162; K core/gang_context.go:34",
         "Permit", "Rejected", REASON_GANG_DELETED),
    Form("T1", "0/1 nodes are available: 1 Gang not found.",
         "K coscheduling.go:206-207; KS schedule_one.go:302-314",
         "Permit", "Unschedulable", REASON_GANG_NOT_FOUND),
    Form("T4", "0/1 nodes are available: 1 rejected due to timeout after waiting %v at plugin %v.",
         "KS framework/runtime/waiting_pods_map.go:101-103; KS schedule_one.go:302-314; "
         "KS137 framework/runtime/waiting_pods_map.go:101-103, schedule_one.go:433-444 "
         "(native gangs: 5m0s at plugin GangScheduling, "
         "framework/plugins/gangscheduling/gangscheduling.go:40-42,407)",
         "Permit", "Timeout", REASON_PERMIT_TIMEOUT),
    Form("F7a", "0/1 nodes are available: 1 preempted.", "K core/preemption.go:880-884",
         "Permit", "Rejected", REASON_PREEMPTED),
    Form("F7b", "0/1 nodes are available: 1 <preemption message>. (preempt success, "
                "alreadyWaitingForBound: %d/%d; or a preemption failure reason)",
         "K core/preemption.go:34-44,320-336,960-995",
         "Permit", "Rejected", REASON_PREEMPTION),
    Form("F6", "Gang %q gets rejected due to pod is unschedulable",
         "K core/core.go:380-381 (dropped by K coscheduling.go:165-167)",
         "PostFilter", "Unschedulable", REASON_GANG_REJECTED),
    Form("B1a", "0/%d nodes are available: can't find gang, gangName: %v, podName: %v.",
         "K core/core.go:290-293; K coscheduling.go:148-155",
         "PreFilter", "UnschedulableAndUnresolvable", REASON_GANG_NOT_FOUND),
    Form("B1b", "0/%d nodes are available: gang has not init, gangName: %v, podName: %v.",
         "K core/core.go:296-299",
         "PreFilter", "UnschedulableAndUnresolvable", REASON_GANG_NOT_INITIALIZED),
    Form("B1c", "0/%d nodes are available: gangGroup %v basic check: %s, current gang: %s, "
                "podName: %v.", "K core/core.go:247-284,300-314",
         "PreFilter", "UnschedulableAndUnresolvable", REASON_BASIC_CHECK),
    Form("B3", "0/%d nodes are available: no cluster network topology.",
         "K core/core.go:325-329; K core/network_topology_workflow.go:36",
         "PreFilter", "UnschedulableAndUnresolvable", REASON_NO_TOPOLOGY),
    Form("P7", "gangGroup %s is scheduling and this pod has not been attempted",
         "K core/gang.go:35; K core/core.go:228-238 (PreEnqueue: no Event in v1.8.0)",
         "PreEnqueue", "UnschedulableAndUnresolvable", REASON_GANG_SCHEDULING),
    Form("P8", "representative pod %s of gangGroupID %s already exists / pod %s is not exists "
               "in gangCache", "K core/gang.go:36-37,572-586 (PreEnqueue: no Event in v1.8.0)",
         "PreEnqueue", "UnschedulableAndUnresolvable", REASON_REPRESENTATIVE),
    Form("L1", "gang child pod not collect enough, gangName: %v, podName: %v",
         "Koordinator before v1.5 (PreFilter)", "PreFilter", "Unschedulable", REASON_BASIC_CHECK),
    Form("L2", "gang scheduleCycle not valid, gangName: %v, podName: %v",
         "Koordinator before v1.5 (PreFilter)", "PreFilter", "Unschedulable",
         REASON_CYCLE_INVALID),
    Form("GS1", "[pod group is unschedulable, ]minCount (%d) cannot be satisfied: %d scheduled, "
                "%d remaining[, <PodGroupPostFilter text>]",
         "KS137 framework/plugins/gangscheduling/gangscheduling.go:494-497 (PlacementFeasible); "
         "KS137 schedule_one_podgroup.go:78,596-601,632-637,869-870 (a member that fit: "
         "errPodGroupUnschedulable before the group's message), 712-730 (a member the cycle "
         "did not reach: the group's status as it was), 795-801 (the PodGroupPostFilter's "
         "text appended), schedule_one.go:1180-1181,1252-1253 (Message joins the reasons "
         "with ', ')",
         "PostFilter", "Rejected", REASON_MIN_COUNT_UNSATISFIABLE),
    Form("GS2", "[pod group is unschedulable, ]minCount (%d) is not yet satisfied: %d scheduled, "
                "%d remaining[, ...]",
         "KS137 framework/plugins/gangscheduling/gangscheduling.go:499-502; "
         "schedule_one_podgroup.go:642-644,1370-1372 (a Wait left at the cycle's end)",
         "PostFilter", "Rejected", REASON_MIN_COUNT_NOT_YET),
    Form("GS3", "waiting for minCount pods from a gang to be scheduled",
         "KS137 framework/plugins/gangscheduling/gangscheduling.go:402-407 (Permit Wait: no "
         "Event while the pod waits; its timeout is T4)",
         "Permit", "Wait", REASON_GANG_WAIT),
    Form("GS4", "waiting for pods's pod group %q to appear in scheduling queue / waiting for "
                "minCount pods from a gang to appear in scheduling queue / waiting for "
                "composite pod group %q tree to meet quorum",
         "KS137 framework/plugins/gangscheduling/gangscheduling.go:234,241,261,276,297 "
         "(PreEnqueue: no Event, kubernetes/kubernetes#141900)",
         "PreEnqueue", "UnschedulableAndUnresolvable", REASON_NATIVE_PREENQUEUE),
    Form("GS5", "all pods in a single pod group should have the same .spec.schedulerName set, "
                "got: %q and %q / ... the same priority as the pod group's priority, got %d and "
                "%d / ... the same preemption policy[ as the pod group's preemption policy], got "
                "%v and %v / profile not found for scheduler name %q",
         "KS137 schedule_one_podgroup.go:107-110,177-191 (FailureHandler with the error: "
         "SchedulerError), 218-275 (validatePodGroup)",
         "PreFilter", "Error", REASON_PODGROUP_INVALID),
    Form("FIT", "0/%v nodes are available: <count> <reason>, ... . [no new claims to deallocate, ]"
                "[preemption: <text>]",
         "KS framework/types.go:806-857; KS schedule_one.go:178-180; "
         "KS framework/plugins/defaultpreemption/default_preemption.go:129,246; "
         "KS framework/preemption/preemption.go:310; "
         "KS framework/plugins/dynamicresources/dynamicresources.go:790",
         "Filter", "Unschedulable", "*"),
)
"""Every message koord-scheduler v1.8.0 writes into a scheduling Event, first match wins in
this order (``F4`` is not a row of its own: it marks any row matched on a cut message). The
``F3``/``U1``/``N1``/``N2``/``T1``/``T4``/``F7`` rows are a member released while it waited at
Permit; ``B*`` a PreFilter refusal; ``P7``/``P8`` PreEnqueue refusals that v1.8.0 writes to its
log only (K coscheduling.go:122-128), read should one ever reach an Event; ``L*`` older
releases. ``G1`` is gangstate's own hold, not the scheduler's: the shim refuses a pod of a held
gang group before the scheduler tries it, so the Event reports no attempt (``attempt`` false:
no cycle record, as ``E2``); it is tried before every other row, as the hold's message tells
the gang's shortfall in words a fit-error reader could take for a node histogram."""

FORMS = {form.id: form for form in CATALOGUE}

_Q = r'"((?:[^"\\]|\\.)*)"'  # a Go %q string, captured without its quotes
_QCUT = r'"((?:[^"\\]|\\.)*)(?:"|$)'  # ... or cut short by the truncation
_NODES = r"0/(\d+) nodes are available: "
_RELEASED = r"0/1 nodes are available: 1 "
_MEMBER = (r"(?:GangGroup|Gang) " + _Q + r" gets rejected due to member Pod (?P<culprit>"
           + _Q + r") is ?unschedulable with reason (?P<inner>" + _QCUT
           + r")(?:, alreadyWaitForBound: (?P<waited>\d+))?")
_B2 = re.compile(_NODES + _MEMBER, re.S)
_F3 = re.compile(_RELEASED + _MEMBER, re.S)
_MEMBER_ANY = re.compile(_MEMBER, re.S)  # older releases wrote it without the frame
_F5 = re.compile(r"gets rejected due to member pod " + _QCUT + r"(?: is unschedulable)?")
_U1 = re.compile(r"Gang " + _Q + r" gets rejected due to Pod " + _Q + r" in Unreserve")
_N1 = re.compile(r"all pending pods is already been attempted")
_N2 = re.compile(r"gang is nil, may be already deleted")
_T1 = re.compile(_RELEASED + r"Gang not found")
_T4 = re.compile(r"rejected due to timeout after waiting (\S+) at plugin (\S+)")
_F7A = re.compile(_RELEASED + r"preempted\.?$")
_F7B = re.compile(_RELEASED + r"(preempt success, alreadyWaitingForBound: \d+/\d+|"
                  r"preemption already attempted by |no pending pods|"
                  r"not eligible due to |list nodes from snapshot err|no nodes available|"
                  r"no potential victims|preemption not helpful|select victims on node error|"
                  r"prepare candidates error)")
_F6 = re.compile(r"Gang " + _Q + r" gets rejected due to pod is unschedulable")
_B1A = re.compile(r"can't find gang, gangName: ")
_B1B = re.compile(r"gang has not init, gangName: ")
_B1C = re.compile(r"basic check: ")
_B3 = re.compile(r"no cluster network topology")
_P7 = re.compile(r"is scheduling and this pod has not been attempted")
_P8 = re.compile(r"representative pod \S+ of gangGroupID \S+ already exists|"
                 r"pod \S+ is not exists in gangCache")
_L1 = re.compile(r"child pod not collect enough")
_L2 = re.compile(r"gang scheduleCycle not valid")
_GS1 = re.compile(r"minCount \((\d+)\) cannot be satisfied: (\d+) scheduled, (\d+) remaining")
_GS2 = re.compile(r"minCount \((\d+)\) is not yet satisfied: (\d+) scheduled, (\d+) remaining")
_GS3 = re.compile(r"waiting for minCount pods from a gang to be scheduled")
_GS4 = re.compile(r"waiting for pods's pod group \"[^\"]*\" to appear in scheduling queue|"
                  r"waiting for minCount pods from a gang to appear in scheduling queue|"
                  r"waiting for composite pod group \"[^\"]*\" tree to meet quorum")
_GS5 = re.compile(r"^all pods in a single pod group should have the same |"
                  r"^profile not found for scheduler name ")
_SKIP = re.compile(r"skip schedule deleting pod: ")
_HELD = re.compile(r"(?:^|nodes are available: )" + re.escape(HOLD_PREFIX) + r"\S+: ")
_FIT_ERROR = re.compile(r"0/(\d+) nodes are available: (.*?)(?:\.(?:\s|$)|$)", re.S)
_FIT_HEAD = re.compile(r"0/\d+ nodes are available: \d+ ")
_FIT_ENTRY = re.compile(r"(\d+) (.+)", re.S)
_ASSIGNED = re.compile(r"Successfully assigned (\S+?)/(\S+) to (\S+)")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def fit_histogram(message: str) -> tuple[int, tuple[tuple[int, str], ...]] | None:
    """The first kube-scheduler fit error in ``message`` as ``(nodes, ((count, reason), ...))``
    in the order written (KS ``framework/types.go:822-851``: ``0/N nodes are available: <count>
    <reason>, ... .``, sorted as strings). ``None`` when the text holds no fit error or one
    without node counts (a PreFilter refusal). A trailing ``preemption:`` clause is not read; an
    entry cut short by the 1024-byte truncation is left out. Pure."""
    match = _FIT_ERROR.search(message)
    if not match:
        return None
    entries = []
    for entry in re.split(r", (?=\d+ )", match.group(2)):
        found = _FIT_ENTRY.fullmatch(entry.strip())
        if found and not entry.endswith(TRUNCATED_SUFFIX.strip()):
            entries.append((int(found.group(1)), found.group(2).strip().rstrip(".")))
    return (int(match.group(1)), tuple(entries)) if entries else None


def dominant_fit_reason(message: str) -> str | None:
    """The node-fit reason that rejected the most nodes in a kube-scheduler ``FitError`` text.

    ``"0/8 nodes are available: 8 Insufficient nvidia.com/gpu."`` -> ``"Insufficient
    nvidia.com/gpu"``; with several reasons (``"0/5 nodes are available: 3 Insufficient cpu, 2
    Insufficient memory."``) the one with the highest node count wins, the first written on a
    tie (kube-scheduler sorts them by text, KS ``framework/types.go:836-846``). Only the first
    ``0/N nodes are available`` clause counts. ``None`` when the text holds no fit error or an
    empty one. Pure."""
    hist = fit_histogram(message)
    if hist is None:
        return None
    best = hist[1][0]
    for count, reason in hist[1][1:]:
        if count > best[0]:
            best = (count, reason)
    return best[1]


def fit_clause(message: str) -> str | None:
    """The first fit error of ``message`` without what follows it (the PostFilter text),
    e.g. ``0/2 nodes are available: 2 Insufficient cpu.`` out of ``0/2 nodes are available: 2
    Insufficient cpu. no new claims to deallocate, preemption: ...``; ``None`` when there is no
    node histogram. Pure."""
    match = _FIT_ERROR.search(message)
    if not match or fit_histogram(message) is None:
        return None
    return match.group(0).strip()


def _qualified(written: str, namespace: str) -> str:
    """``ns/name`` of a member written bare (``pod.Name``, K core/core.go:472) or qualified."""
    return written if "/" in written else f"{namespace}/{written}"


def _form(form_id: str, truncated: bool, **fields: object) -> Outcome:
    row = FORMS[form_id]
    return Outcome(row.stage, row.status, row.reason, form=form_id, truncated=truncated,
                   **fields)  # type: ignore[arg-type]


def _member(match: re.Match[str], form_id: str, namespace: str, name: str,
            truncated: bool) -> Outcome:
    """A ``GangGroup %q gets rejected due to member Pod %q ...`` message (B2/F3): the culprit,
    its fit error and ``alreadyWaitForBound``."""
    culprit = _qualified(_unquote(match.group("culprit")[1:-1]), namespace)
    inner = _unquote(match.group("inner")[1:].removesuffix('"'))
    waited = match.group("waited")
    row = FORMS[form_id]
    fit = fit_clause(inner)
    reason = row.reason
    if culprit == f"{namespace}/{name}" and form_id != "B2":
        reason = dominant_fit_reason(inner) or REASON_GANG_REJECTED
        return Outcome("Filter", "Unschedulable", reason, culprit=culprit, form=form_id,
                       fit_error=fit or (inner or None), truncated=truncated,
                       already_wait_for_bound=None if waited is None else int(waited))
    return Outcome(row.stage, row.status, reason, culprit=culprit, form=form_id,
                   fit_error=fit or (inner or None), truncated=truncated,
                   already_wait_for_bound=None if waited is None else int(waited))


def parse_scheduler_event(event_reason: str, message: str, namespace: str,
                          name: str) -> Outcome:
    """Read one scheduler Event about pod ``namespace/name`` into an ``Outcome``.

    ``event_reason`` is the Event's ``reason`` (``FailedScheduling`` or ``Scheduled``),
    ``message`` its ``message`` (``note`` in events.k8s.io/v1). The rows of ``CATALOGUE`` are
    tried in order; the first that matches gives the outcome (``form`` names it). Rows that name
    the member that did not fit (``B2``, ``F3``, ``F5``) give its ``ns/name`` as ``culprit``,
    with its fit error and ``alreadyWaitForBound`` where written (``U1`` names a member that was
    unreserved, no culprit); ``F3`` naming the pod itself is its own
    failure (``Filter``/``Unschedulable``, older releases wrote it). ``G1`` (gangstate's own
    hold, ``gangstate holds gang group <group>: ...``) and ``E2`` report no attempt
    (``attempt`` false). A message cut at 1024 bytes
    (``F4``) is read as far as it goes (``truncated``). Anything else: ``Filter``/
    ``Unschedulable`` with ``event_reason`` as the reason and ``parsed=False``. Raises nothing.
    """
    truncated = len(message.encode()) >= NOTE_LENGTH_LIMIT - 1 \
        and message.endswith(TRUNCATED_SUFFIX)
    if event_reason == "Scheduled":
        assigned = _ASSIGNED.search(message)
        return Outcome("Bind", "Bound", "", node=assigned.group(3) if assigned else None,
                       parsed=assigned is not None, form="E1" if assigned else "")
    if _SKIP.match(message):
        return _form("E2", truncated, attempt=False)
    if _HELD.search(message):
        return _form("G1", truncated, attempt=False)
    found = _B2.match(message)
    if found:
        return _member(found, "B2", namespace, name, truncated)
    found = _F3.match(message) or _MEMBER_ANY.search(message)
    if found:
        return _member(found, "F3", namespace, name, truncated)
    found = _F5.search(message)
    if found:
        return _form("F5", truncated, culprit=_qualified(_unquote(found.group(1)), namespace))
    found = _U1.search(message)
    if found:
        # the pod named was unreserved (its own wait was rejected): it is no culprit that did
        # not fit, so no ``culprit`` is set (K core/core.go:456-475)
        if _qualified(_unquote(found.group(2)), namespace) == f"{namespace}/{name}":
            return Outcome("Unreserve", "Unschedulable", REASON_UNRESERVE, form="U1",
                           truncated=truncated)
        return _form("U1", truncated)
    for form_id, pattern in (("N1", _N1), ("N2", _N2), ("T1", _T1), ("T4", _T4),
                             ("F7a", _F7A), ("F7b", _F7B)):
        if pattern.search(message):
            return _form(form_id, truncated)
    if not _FIT_HEAD.match(message):
        # kube-scheduler v1.37's own gangs (GangScheduling): a pod-group cycle refused for the
        # gang's minCount (also inside "0/N placements are available, first placement status:
        # ...", KS137 schedule_one_podgroup.go:1041,1141), a Permit wait, a PreEnqueue
        # refusal, a pod group refused before its cycle; a member's own fit error in that
        # cycle is row FIT (KS137 schedule_one.go:277-283: no PostFilter text)
        for form_id, pattern in (("GS1", _GS1), ("GS2", _GS2)):
            found = pattern.search(message)
            if found:
                # "S scheduled": the members placed in that pod-group cycle before it ended,
                # read as the members that fit at once (the episode's ``fit``, as Koordinator's
                # alreadyWaitForBound)
                return _form(form_id, truncated, already_wait_for_bound=int(found.group(2)))
        for form_id, pattern in (("GS3", _GS3), ("GS4", _GS4), ("GS5", _GS5)):
            if pattern.search(message):
                return _form(form_id, truncated)
    fit = fit_histogram(message)
    if fit is not None and _FIT_HEAD.match(message):
        return Outcome("Filter", "Unschedulable", dominant_fit_reason(message) or "",
                       culprit=f"{namespace}/{name}", form="FIT",
                       fit_error=fit_clause(message), truncated=truncated)
    for form_id, pattern in (("F6", _F6), ("B1a", _B1A), ("B1b", _B1B), ("B3", _B3),
                             ("P7", _P7), ("P8", _P8), ("B1c", _B1C), ("L1", _L1),
                             ("L2", _L2)):
        if pattern.search(message):
            return _form(form_id, truncated)
    if fit is not None:  # a fit error in another frame: still the pod's own failure
        return Outcome("Filter", "Unschedulable", dominant_fit_reason(message) or "",
                       culprit=f"{namespace}/{name}", form="FIT",
                       fit_error=fit_clause(message), truncated=truncated)
    return Outcome("Filter", "Unschedulable", event_reason or "FailedScheduling", parsed=False,
                   truncated=truncated)


_PREEMPTION = re.compile(r'preemption: ([^"]*)', re.S)
_NO_VICTIMS = "No preemption victims found for incoming pod"
_NOT_HELPFUL = "Preemption is not helpful for scheduling"


def preemption_of(message: str) -> tuple[str, str] | None:
    """What the PostFilter text of a FailedScheduling message says of preemption, as ``(kind,
    text)``: ``text`` as written after ``preemption: `` (KS ``framework/plugins/
    defaultpreemption/default_preemption.go:126-130``, K ``core/core.go:350-355``), ``kind``:

    - ``victims-terminating``: ``not eligible due to a terminating pod on the nominated node.``
      (KS ``default_preemption.go:317-337``; Koordinator's job preemption writes ``... due to
      terminating pod ...``, K ``core/preemption.go:37``): a pod preempted for this one is
      still terminating on its nominated node; the preemption is under way;
    - ``no-victims``: ``0/N nodes are available: N No preemption victims found for incoming
      pod.`` on every node (KS ``default_preemption.go:244-247``): no lower-priority pod left;
    - ``not-helpful``: a node histogram of other reasons (``Preemption is not helpful for
      scheduling``, KS ``framework/preemption/preemption.go:307-316``, or mixed);
    - ``not-eligible``: another ``not eligible due to ...`` (``preemptionPolicy=Never``);
    - ``preempting``: Koordinator's ``preempt success, ...``; ``other``: anything else.

    A clause inside a quoted fit error (``B2``/``F3``: ``... with reason "<fit error>.
    preemption: ..."``) ends at the quote; of several clauses the last (the pod's own, after the
    quoted one) counts. ``None`` when the message has no ``preemption: `` clause. Pure."""
    found = _PREEMPTION.findall(message)
    if not found:
        return None
    text = found[-1].strip()
    if "not eligible due to a terminating pod on the nominated node" in text \
            or "not eligible due to terminating pod on the nominated node" in text:
        return "victims-terminating", text
    if text.startswith("not eligible due to"):
        return "not-eligible", text
    if text.startswith("preempt success"):
        return "preempting", text
    hist = fit_histogram(text)
    if hist is not None:
        nodes, entries = hist
        if entries and all(reason == _NO_VICTIMS for _, reason in entries) \
                and sum(count for count, _ in entries) == nodes:
            return "no-victims", text
        return "not-helpful", text
    return "other", text


PREEMPTED_REASON = "Preempted"
"""The reason of the Event kube-scheduler writes on each victim of a preemption (KS
``framework/preemption/preemption.go:216``; K ``core/preemption.go:911``)."""
_PREEMPTED = re.compile(r"Preempted by pod (\S+) on node (\S+)")


def preempted_by(message: str) -> tuple[str, str] | None:
    """``(preemptor uid, node)`` of a ``Preempted`` Event's message, ``Preempted by pod %v on
    node %v`` (KS ``framework/preemption/preemption.go:216``: the preemptor's uid and the
    candidate node); ``None`` for another text. Pure."""
    found = _PREEMPTED.search(message)
    return (found.group(1), found.group(2)) if found else None
