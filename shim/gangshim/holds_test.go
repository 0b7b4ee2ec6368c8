package gangshim

// Tests of gangstate's holds on the fake framework of hooks_test.go: Koordinator's real
// Coscheduling and gang cache underneath, the clock the fixture's, the sweep run by hand.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwktype "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/koordinator-sh/koordinator/apis/thirdparty/scheduler-plugins/pkg/apis/scheduling/v1alpha1"

	"gangstate.local/shim/bus"
	"gangstate.local/shim/fencing"
)

// holdFixture is a gang ns/g of two pending pods (minMember 2) under a shim whose fences are
// recovered.
func holdFixture(t *testing.T) (*fixture, *corev1.Pod, *corev1.Pod) {
	p0, p1 := gangPod("ns", "p-0", "g"), gangPod("ns", "p-1", "g")
	f := newFixture(t, time.Second, []*v1alpha1.PodGroup{podGroup("ns", "g", 2)}, []*corev1.Pod{p0, p1})
	f.shim.ready = true
	return f, p0, p1
}

// holdGang is a HoldGang as gangstate writes it (streams/core/rules/holding.py _issue_hold).
func holdGang(group string, epoch, ttl int64, message string) []byte {
	return []byte(fmt.Sprintf(`{"schema":"gangstate.command/v1","id":"%s#%d",`+
		`"issued_at":"2026-12-02T04:00:00.000000Z","type":"HoldGang","gang_group":"%s",`+
		`"epoch":%d,"expected_representative":null,"representative":"","reason":"GangCannotFit",`+
		`"cycle":null,"ttl_seconds":%d,"message":%q}`, group, epoch, group, epoch, ttl, message))
}

// releaseGang is a ReleaseGang as gangstate writes it.
func releaseGang(group string, epoch int64) []byte {
	return []byte(fmt.Sprintf(`{"schema":"gangstate.command/v1","id":"%s#%d",`+
		`"issued_at":"2026-12-02T04:00:00.000000Z","type":"ReleaseGang","gang_group":"%s",`+
		`"epoch":%d,"expected_representative":null,"representative":"","reason":"CapacityChanged"}`,
		group, epoch, group, epoch))
}

// command hands value to the shim as the consumer does and returns the acks published since
// the last take (the other records dropped) and whether its offset was committed.
func (f *fixture) command(value []byte) ([]fencing.Ack, bool) {
	f.t.Helper()
	committed := false
	f.shim.onCommand(value, func() { committed = true })
	return f.acks(), committed
}

// acks takes the records published since the last take and returns the acks among them.
func (f *fixture) acks() []fencing.Ack {
	f.t.Helper()
	f.rec.mu.Lock()
	var out []fencing.Ack
	for i, raw := range f.rec.raw {
		if f.rec.recs[i].Schema != fencing.AckSchema {
			continue
		}
		var a fencing.Ack
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			f.t.Fatal(err)
		}
		if f.rec.keys[i] != f.shim.cfg.Key(a.GangGroup) {
			f.t.Fatalf("the ack is keyed by its gang group within the cluster: %q", f.rec.keys[i])
		}
		out = append(out, a)
	}
	f.rec.mu.Unlock()
	f.rec.take()
	return out
}

// oneAck checks that acks is one ack of id with outcome and reason.
func oneAck(t *testing.T, what string, acks []fencing.Ack, id, outcome, reason string) {
	t.Helper()
	if len(acks) != 1 || acks[0].CommandID != id || acks[0].Outcome != outcome ||
		acks[0].Reason != reason || acks[0].Shim != "shim-test" {
		t.Fatalf("%s: acks %+v, want one %s %s %q", what, acks, id, outcome, reason)
	}
}

// activatedSorted is every pod activated so far, sorted.
func (f *fixture) activatedSorted() []string {
	got := f.act.activated()
	sort.Strings(got)
	return got
}

const heldMsg = "gangstate holds gang group ns/g: it cannot fit"

// refused checks that a PreEnqueue of pod is refused by the hold with the exact status.
func refused(t *testing.T, f *fixture, pod *corev1.Pod) {
	t.Helper()
	st := f.shim.PreEnqueue(context.Background(), pod)
	if st.Code() != fwktype.UnschedulableAndUnresolvable || st.Message() != heldMsg {
		t.Fatalf("PreEnqueue of %s: %v %q, want UnschedulableAndUnresolvable %q", pod.Name,
			st.Code(), st.Message(), heldMsg)
	}
}

func refusals(hook string) float64 { return testutil.ToFloat64(bus.HoldRefusals.WithLabelValues(hook)) }
func releases(cause string) float64 {
	return testutil.ToFloat64(bus.HoldsReleased.WithLabelValues(cause))
}

func TestAHeldGroupIsRefusedUntilReleaseGangActivatesIt(t *testing.T) {
	f, p0, p1 := holdFixture(t)
	ctx := context.Background()
	pre, bpf, byCommand := refusals("PreEnqueue"), refusals("BeforePreFilter"), releases("command")

	acks, committed := f.command(holdGang("ns/g", 1, 180, "it cannot fit"))
	oneAck(t, "HoldGang", acks, "ns/g#1", fencing.Applied, "")
	if !committed || acks[0].Representative != nil || acks[0].Epoch != 1 ||
		testutil.ToFloat64(bus.Holds) != 1 {
		t.Fatalf("ack %+v committed %v holds %v", acks[0], committed, testutil.ToFloat64(bus.Holds))
	}

	// PreEnqueue refuses every member; Koordinator's is not run (no representative recorded)
	refused(t, f, p0)
	refused(t, f, p1)
	recs := f.rec.take()
	expect(t, "PreEnqueue refusals", recs,
		"PreEnqueue UnschedulableAndUnresolvable GangHeld ns/p-0",
		"PreEnqueue UnschedulableAndUnresolvable GangHeld ns/p-1")
	if recs[0].Message != heldMsg || recs[0].Code != "UnschedulableAndUnresolvable" {
		t.Fatalf("refusal record: %+v", recs[0])
	}
	if rep := f.shim.representative([]string{"ns/g"}); rep != "" {
		t.Fatalf("a held group gets no representative: %q", rep)
	}

	// a member already in the queue is refused at BeforePreFilter: no round opens, its
	// PostFilter reports no fit error, and it is not taken as nominated
	state := framework.NewCycleState()
	_, _, st := f.shim.BeforePreFilter(ctx, state, p1)
	if st.Code() != fwktype.UnschedulableAndUnresolvable || st.Message() != heldMsg {
		t.Fatalf("BeforePreFilter: %v", st)
	}
	f.shim.PostFilter(ctx, state, p1, unschedulable("Insufficient cpu"))
	f.shim.AfterPostFilter(ctx, state, p1, unschedulable("Insufficient cpu"))
	expect(t, "BeforePreFilter refusal", f.rec.take(),
		"PreFilter UnschedulableAndUnresolvable GangHeld ns/p-1")
	if f.shim.rounds.Current() != nil || f.shim.pre.Marked["ns/p-1"] {
		t.Fatalf("round %v, marked %v", f.shim.rounds.Current(), f.shim.pre.Marked)
	}
	if refusals("PreEnqueue")-pre != 2 || refusals("BeforePreFilter")-bpf != 1 {
		t.Fatalf("refusals counted: PreEnqueue +%v, BeforePreFilter +%v",
			refusals("PreEnqueue")-pre, refusals("BeforePreFilter")-bpf)
	}
	if got := f.act.activated(); len(got) != 0 {
		t.Fatalf("nothing activated while held: %v", got)
	}

	// ReleaseGang: Applied, the pending members activated, PreEnqueue lets them through again
	acks, committed = f.command(releaseGang("ns/g", 2))
	oneAck(t, "ReleaseGang", acks, "ns/g#2", fencing.Applied, "")
	if !committed || fmt.Sprint(f.activatedSorted()) != "[ns/p-0 ns/p-1]" ||
		releases("command")-byCommand != 1 || testutil.ToFloat64(bus.Holds) != 0 {
		t.Fatalf("committed %v activated %v released +%v holds %v", committed, f.activatedSorted(),
			releases("command")-byCommand, testutil.ToFloat64(bus.Holds))
	}
	if st := f.shim.PreEnqueue(ctx, p0); !st.IsSuccess() {
		t.Fatalf("PreEnqueue after the release: %v", st)
	}

	// a ReleaseGang when nothing is held is Applied and activates nobody
	acks, _ = f.command(releaseGang("ns/g", 3))
	oneAck(t, "ReleaseGang of nothing held", acks, "ns/g#3", fencing.Applied, "")
	if len(f.act.activated()) != 2 || releases("command")-byCommand != 1 {
		t.Fatalf("activated %v released +%v", f.act.activated(), releases("command")-byCommand)
	}
	// its ack names the representative Koordinator recorded meanwhile (a hold changes none)
	if acks[0].Representative == nil || *acks[0].Representative != "ns/p-0" {
		t.Fatalf("ack representative %v", acks[0].Representative)
	}
}

// ttl 60 s from 04:00:00; renewed at 04:00:50 for 60 s, so held until 04:01:50.
func TestAHoldLapsesAfterItsTTLUnlessRenewed(t *testing.T) {
	f, p0, _ := holdFixture(t)
	byTTL := releases("ttl")
	f.command(holdGang("ns/g", 1, 60, "it cannot fit"))
	f.clock.advance(50 * time.Second)
	acks, _ := f.command(holdGang("ns/g", 2, 60, "it cannot fit"))
	oneAck(t, "renewal", acks, "ns/g#2", fencing.Applied, "")
	f.clock.advance(10 * time.Second) // 04:01:00: the first hold's lapse, not the renewal's
	f.shim.sweepOnce()
	refused(t, f, p0)
	f.clock.advance(49 * time.Second) // 04:01:49
	f.shim.sweepOnce()
	refused(t, f, p0)
	if len(f.act.activated()) != 0 || releases("ttl") != byTTL {
		t.Fatalf("released before 04:01:50: activated %v", f.act.activated())
	}
	f.clock.advance(time.Second) // 04:01:50
	f.shim.sweepOnce()
	if fmt.Sprint(f.activatedSorted()) != "[ns/p-0 ns/p-1]" || releases("ttl")-byTTL != 1 ||
		testutil.ToFloat64(bus.Holds) != 0 {
		t.Fatalf("at the lapse: activated %v released +%v", f.activatedSorted(), releases("ttl")-byTTL)
	}
	if st := f.shim.PreEnqueue(context.Background(), p0); !st.IsSuccess() {
		t.Fatalf("PreEnqueue after the lapse: %v", st)
	}
}

// GANGSTATE_SHIM_HOLD_SILENCE 3m (the default): a hold of 1 h, the last command heard at
// 04:02:00 (another group's), so every hold is dropped at 04:05:00, not at 04:04:59.
func TestSilenceDropsEveryHold(t *testing.T) {
	f, p0, _ := holdFixture(t)
	if f.shim.cfg.HoldSilence != 3*time.Minute {
		t.Fatalf("default silence %v", f.shim.cfg.HoldSilence)
	}
	bySilence := releases("silence")
	f.command(holdGang("ns/g", 1, 3600, "it cannot fit"))
	f.clock.advance(2 * time.Minute)
	acks, _ := f.command(releaseGang("ns/other", 1))
	oneAck(t, "another group's command", acks, "ns/other#1", fencing.Applied, "")
	f.clock.advance(2*time.Minute + 59*time.Second)
	f.shim.sweepOnce()
	refused(t, f, p0)
	f.clock.advance(time.Second)
	f.shim.sweepOnce()
	if fmt.Sprint(f.activatedSorted()) != "[ns/p-0 ns/p-1]" || releases("silence")-bySilence != 1 ||
		testutil.ToFloat64(bus.Holds) != 0 {
		t.Fatalf("after the silence: activated %v released +%v", f.activatedSorted(),
			releases("silence")-bySilence)
	}
	if st := f.shim.PreEnqueue(context.Background(), p0); !st.IsSuccess() {
		t.Fatalf("PreEnqueue after the silence: %v", st)
	}
}

func TestHoldCommandsAreFencedByEpochAndAckedOnce(t *testing.T) {
	f, p0, _ := holdFixture(t)
	f.command(holdGang("ns/g", 5, 180, "it cannot fit"))
	acks, committed := f.command(releaseGang("ns/g", 3))
	oneAck(t, "older ReleaseGang", acks, "ns/g#3", fencing.Stale,
		"epoch 3 is not above the gang group's fence 5")
	if !committed {
		t.Fatal("a Stale ack is committed once delivered")
	}
	refused(t, f, p0)
	f.rec.take()
	dup := testutil.ToFloat64(bus.Commands.WithLabelValues("duplicate"))
	acks, committed = f.command(holdGang("ns/g", 5, 180, "it cannot fit"))
	if len(acks) != 0 || !committed || testutil.ToFloat64(bus.Commands.WithLabelValues("duplicate"))-dup != 1 {
		t.Fatalf("a hold answered before: acks %+v committed %v", acks, committed)
	}
	// before the fences are recovered a hold is neither decided nor committed
	f.shim.ready = false
	acks, committed = f.command(holdGang("ns/g", 6, 180, "it cannot fit"))
	if len(acks) != 0 || committed || f.shim.state.Fence("ns/g") != 5 {
		t.Fatalf("not ready: acks %+v committed %v fence %d", acks, committed, f.shim.state.Fence("ns/g"))
	}
}

// nominate sets p0's status.nominatedNodeName to n-1 and waits until the informer has it.
func nominate(t *testing.T, f *fixture, p0 *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	live := p0.DeepCopy()
	live.Status.NominatedNodeName = "n-1"
	if _, err := f.kube.CoreV1().Pods("ns").UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := f.shim.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	waitFor(t, "the informer sees p-0 nominated", func() bool {
		p, err := lister.Pods("ns").Get("p-0")
		return err == nil && p.Status.NominatedNodeName == "n-1"
	})
}

func TestHoldGangAppliedForANominatedMemberWithNoVictimTerminating(t *testing.T) {
	// a nominated node without victims (kube-scheduler leaves it on members that waited at
	// Permit in a failed round): no preemption under way, the hold is applied
	f, p0, _ := holdFixture(t)
	nominate(t, f, p0)
	acks, _ := f.command(holdGang("ns/g", 1, 180, "it cannot fit"))
	oneAck(t, "HoldGang, nominated without victims", acks, "ns/g#1", fencing.Applied, "")
	if st := f.shim.PreEnqueue(context.Background(), p0); st.IsSuccess() {
		t.Fatalf("p-0 not held: %v", st)
	}
}

func TestHoldGangRefusedWhileAMemberIsNominated(t *testing.T) {
	f, p0, _ := holdFixture(t)
	ctx := context.Background()
	// a victim of lower priority terminating on n-1 by the scheduler's preemption
	low := int32(-10)
	now := metav1.Now()
	victim := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: "other", UID: "uid-victim",
			DeletionTimestamp: &now, Finalizers: []string{"test/keep"}},
		Spec: corev1.PodSpec{NodeName: "n-1", Priority: &low},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonPreemptionByScheduler}}},
	}
	if _, err := f.kube.CoreV1().Pods("other").Create(ctx, victim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := f.shim.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	waitFor(t, "the informer sees the victim", func() bool {
		_, err := lister.Pods("other").Get("victim")
		return err == nil
	})
	live := p0.DeepCopy()
	live.Status.NominatedNodeName = "n-1"
	if _, err := f.kube.CoreV1().Pods("ns").UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the informer sees p-0 nominated", func() bool {
		p, err := lister.Pods("ns").Get("p-0")
		return err == nil && p.Status.NominatedNodeName == "n-1"
	})
	acks, committed := f.command(holdGang("ns/g", 1, 180, "it cannot fit"))
	oneAck(t, "HoldGang during a preemption", acks, "ns/g#1", fencing.PreconditionFailed,
		"preemption in progress: ns/p-0 nominated to n-1")
	if !committed || f.shim.state.Fence("ns/g") != 1 {
		t.Fatalf("committed %v fence %d", committed, f.shim.state.Fence("ns/g"))
	}
	if st := f.shim.PreEnqueue(ctx, p0); !st.IsSuccess() {
		t.Fatalf("a refused hold holds nothing: %v", st)
	}
}

func TestHoldGangRefusedWhenHoldsAreOffInTheShim(t *testing.T) {
	f, p0, _ := holdFixture(t)
	f.shim.cfg.Holds = false
	acks, _ := f.command(holdGang("ns/g", 1, 180, "it cannot fit"))
	oneAck(t, "HoldGang with GANGSTATE_SHIM_HOLDS=off", acks, "ns/g#1", fencing.PreconditionFailed,
		"holds are off in the scheduler shim (GANGSTATE_SHIM_HOLDS=off)")
	if st := f.shim.PreEnqueue(context.Background(), p0); !st.IsSuccess() {
		t.Fatalf("PreEnqueue: %v", st)
	}
	// a ReleaseGang is still Applied
	acks, _ = f.command(releaseGang("ns/g", 2))
	oneAck(t, "ReleaseGang with holds off", acks, "ns/g#2", fencing.Applied, "")
}

func TestHoldGangRefusedInANamespaceAnnotatedOff(t *testing.T) {
	f, p0, _ := holdFixture(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns",
		Annotations: map[string]string{HoldAnnotation: "off"}}}
	if _, err := f.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := f.shim.handle.SharedInformerFactory().Core().V1().Namespaces().Lister()
	waitFor(t, "the informer sees the namespace", func() bool {
		_, err := lister.Get("ns")
		return err == nil
	})
	acks, _ := f.command(holdGang("ns/g", 1, 180, "it cannot fit"))
	oneAck(t, "HoldGang in a namespace annotated off", acks, "ns/g#1", fencing.PreconditionFailed,
		"holds are off in namespace ns (annotation gangstate.io/hold: off)")
	if st := f.shim.PreEnqueue(ctx, p0); !st.IsSuccess() {
		t.Fatalf("PreEnqueue: %v", st)
	}
	// the annotation turned on again: the next HoldGang is Applied
	ns.Annotations[HoldAnnotation] = "on"
	if _, err := f.kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the informer sees the annotation changed", func() bool {
		got, err := lister.Get("ns")
		return err == nil && got.Annotations[HoldAnnotation] == "on"
	})
	acks, _ = f.command(holdGang("ns/g", 2, 180, "it cannot fit"))
	oneAck(t, "HoldGang once the namespace allows it", acks, "ns/g#2", fencing.Applied, "")
	refused(t, f, p0)
}

func TestAHoldIsDroppedWhenItsGroupLeavesTheGangCache(t *testing.T) {
	f, _, _ := holdFixture(t)
	ctx := context.Background()
	byEviction := releases("evicted")
	f.command(holdGang("ns/g", 1, 180, "it cannot fit"))
	if got := f.shim.forgetGone(); len(got) != 0 {
		t.Fatalf("forgotten while cached: %v", got)
	}
	if err := f.pgs.SchedulingV1alpha1().PodGroups("ns").Delete(ctx, "g", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gang leaves Koordinator's gang cache", func() bool {
		return !f.shim.inCache([]string{"ns/g"})
	})
	if got := f.shim.forgetGone(); fmt.Sprint(got) != "[ns/g]" {
		t.Fatalf("forgotten: %v", got)
	}
	f.shim.mu.Lock()
	n := f.shim.holds.Len()
	f.shim.mu.Unlock()
	if n != 0 || releases("evicted")-byEviction != 1 || testutil.ToFloat64(bus.Holds) != 0 {
		t.Fatalf("holds left %d, released +%v", n, releases("evicted")-byEviction)
	}
}

// activateGang is an ActivateGang as gangstate writes it (streams/core/rules/retry.py
// warn_stalled): no compare-and-swap, the group's current representative.
func activateGang(group string, epoch int64) []byte {
	return []byte(fmt.Sprintf(`{"schema":"gangstate.command/v1","id":"%s#%d",`+
		`"issued_at":"2026-12-02T04:00:00.000000Z","type":"ActivateGang","gang_group":"%s",`+
		`"epoch":%d,"expected_representative":null,"representative":"ns/p-0",`+
		`"reason":"PreemptionDone","cycle":null}`, group, epoch, group, epoch))
}

// Rule PR7: an ActivateGang is decided at once (never buffered), Applied, and activates the
// group's pending members, holding nothing; delivered again it is not acked again; one at or
// below the fence is Stale and activates nobody.
func TestActivateGangActivatesThePendingMembersAtOnce(t *testing.T) {
	f, _, _ := holdFixture(t)
	byCommand := releases("command")
	acks, committed := f.command(activateGang("ns/g", 1))
	oneAck(t, "ActivateGang", acks, "ns/g#1", fencing.Applied, "")
	if !committed || acks[0].Epoch != 1 || fmt.Sprint(f.activatedSorted()) != "[ns/p-0 ns/p-1]" {
		t.Fatalf("committed %v ack %+v activated %v", committed, acks[0], f.activatedSorted())
	}
	if len(f.shim.state.Pending["ns/g"]) != 0 || testutil.ToFloat64(bus.Holds) != 0 ||
		releases("command") != byCommand {
		t.Fatalf("buffered %v holds %v released +%v", f.shim.state.Pending["ns/g"],
			testutil.ToFloat64(bus.Holds), releases("command")-byCommand)
	}
	acks, committed = f.command(activateGang("ns/g", 1))
	if len(acks) != 0 || !committed || len(f.act.activated()) != 2 {
		t.Fatalf("delivered again: acks %+v committed %v activated %v", acks, committed,
			f.act.activated())
	}
	f.shim.state.Fences["ns/g"] = 5
	acks, _ = f.command([]byte(strings.Replace(string(activateGang("ns/g", 4)), "ns/g#4",
		"ns/g#4b", 1)))
	oneAck(t, "stale ActivateGang", acks, "ns/g#4b", fencing.Stale,
		"epoch 4 is not above the gang group's fence 5")
	if len(f.act.activated()) != 2 {
		t.Fatalf("a stale ActivateGang activates nobody: %v", f.act.activated())
	}
}
