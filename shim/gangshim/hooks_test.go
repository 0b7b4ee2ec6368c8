package gangshim

// Tests of the hooks against a fake framework handle, built the way kubernetes-sigs/
// scheduler-plugins and Koordinator test their plugins: kube-scheduler's test framework
// (schedulertesting.NewFramework with fake clientsets and a shared informer factory), wrapped
// in Koordinator's frameworkext extender with a PodGroup clientset on the handle (what
// Koordinator v1.8.0's coscheduling_test.go does in newPluginTestSuit and
// GangPluginFactoryProxy; the code here is our own). Koordinator's real Coscheduling and gang
// cache run underneath; only Kafka is replaced by a recorder of the records published.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwktype "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedulermetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedulertesting "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/koordinator-sh/koordinator/apis/thirdparty/scheduler-plugins/pkg/apis/scheduling/v1alpha1"
	pgclientset "github.com/koordinator-sh/koordinator/apis/thirdparty/scheduler-plugins/pkg/generated/clientset/versioned"
	pgfake "github.com/koordinator-sh/koordinator/apis/thirdparty/scheduler-plugins/pkg/generated/clientset/versioned/fake"
	koordfake "github.com/koordinator-sh/koordinator/pkg/client/clientset/versioned/fake"
	koordinformers "github.com/koordinator-sh/koordinator/pkg/client/informers/externalversions"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/apis/config"
	configv1 "github.com/koordinator-sh/koordinator/pkg/scheduler/apis/config/v1"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/frameworkext"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling"

	"gangstate.local/shim/bus"
	"gangstate.local/shim/fencing"
)

type settableGates interface {
	clientfeatures.Gates
	Set(key clientfeatures.Feature, value bool) error
}

func init() {
	schedulermetrics.Register()
	// the fake clientset does not serve watch lists (as Koordinator's own tests note)
	if g, ok := clientfeatures.FeatureGates().(settableGates); ok {
		_ = g.Set(clientfeatures.WatchListClient, false)
	}
}

// recorder stands in for the Kafka publisher: it keeps every record, encoded as bus would.
type recorder struct {
	mu   sync.Mutex
	recs []Record
	raw  []string
	keys []string
}

func (r *recorder) Publish(key, schema string, value any, done func(error)) bool {
	raw, err := json.Marshal(value)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, string(raw))
	r.keys = append(r.keys, key)
	if rec, ok := value.(*Record); ok {
		r.recs = append(r.recs, *rec)
	} else {
		r.recs = append(r.recs, Record{Schema: schema})
	}
	if done != nil {
		done(nil)
	}
	return true
}

// take returns the records published since the last take.
func (r *recorder) take() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.recs
	r.recs, r.raw, r.keys = nil, nil, nil
	return out
}

// activator records the pods the shim activates (Handle.Activate: kube-scheduler's queue moves
// them to activeQ).
type activator struct {
	mu   sync.Mutex
	pods []string
}

func (a *activator) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.pods = append(a.pods, k)
	}
}

func (a *activator) activated() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.pods...)
}

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// pgHandle is the extended handle with a PodGroup clientset, which Koordinator's
// coscheduling.New takes instead of building one from a kubeconfig (K coscheduling.go:88-94).
type pgHandle struct {
	frameworkext.ExtendedHandle
	pgclientset.Interface
	koordInformers koordinformers.SharedInformerFactory
}

func (h *pgHandle) KoordinatorSharedInformerFactory() koordinformers.SharedInformerFactory {
	return h.koordInformers
}

// fixture is a shim on a fake framework with Koordinator's Coscheduling inside.
type fixture struct {
	t     *testing.T
	shim  *Shim
	fw    framework.Framework
	rec   *recorder
	act   *activator
	clock *fakeClock
	kube  *kubefake.Clientset
	pgs   *pgfake.Clientset
}

var start = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)

// newFixture creates the PodGroups and pods first (Koordinator's gang cache syncs them when
// the plugin is built), one node "n-1", and the shim with the round interval given.
func newFixture(t *testing.T, interval time.Duration, pgs []*v1alpha1.PodGroup, pods []*corev1.Pod) *fixture {
	t.Helper()
	f := &fixture{t: t, rec: &recorder{}, act: &activator{}, clock: &fakeClock{t: start},
		kube: kubefake.NewSimpleClientset(), pgs: pgfake.NewSimpleClientset()}
	ctx := context.Background()
	for _, pg := range pgs {
		if _, err := f.pgs.SchedulingV1alpha1().PodGroups(pg.Namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if _, err := f.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var v1args configv1.CoschedulingArgs
	configv1.SetDefaults_CoschedulingArgs(&v1args)
	var args config.CoschedulingArgs
	if err := configv1.Convert_v1_CoschedulingArgs_To_config_CoschedulingArgs(&v1args, &args, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := bus.Parse(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.ShimID, cfg.RoundInterval = "shim-test", interval
	factory := func(_ context.Context, _ apiruntime.Object, h fwktype.Handle) (fwktype.Plugin, error) {
		koord := koordfake.NewSimpleClientset()
		koordInformers := koordinformers.NewSharedInformerFactory(koord, 0)
		extenders, err := frameworkext.NewFrameworkExtenderFactory(
			frameworkext.WithKoordinatorClientSet(koord),
			frameworkext.WithKoordinatorSharedInformerFactory(koordInformers))
		if err != nil {
			return nil, err
		}
		handle := &pgHandle{ExtendedHandle: extenders.NewFrameworkExtender(h.(framework.Framework)),
			Interface: f.pgs, koordInformers: koordInformers}
		inner, err := coscheduling.New(ctx, &args, handle)
		if err != nil {
			return nil, err
		}
		f.shim, err = newShim(inner.(*coscheduling.Coscheduling), handle, cfg, f.rec, f.clock.now)
		return f.shim, err
	}
	node := st.MakeNode().Name("n-1").Capacity(map[corev1.ResourceName]string{"cpu": "4"}).Obj()
	informerFactory := informers.NewSharedInformerFactory(f.kube, 0)
	f.fw, err = schedulertesting.NewFramework(ctx,
		[]schedulertesting.RegisterPluginFunc{
			schedulertesting.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
			schedulertesting.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
			schedulertesting.RegisterPluginAsExtensions(Name, factory, "PreEnqueue", "PreFilter",
				"PostFilter", "Reserve", "Permit", "PostBind"),
		}, "koord-scheduler",
		frameworkruntime.WithClientSet(f.kube),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSnapshotSharedLister(newNodeLister(node)),
		frameworkruntime.WithEventRecorder(events.NewFakeRecorder(100)),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodActivator(f.act))
	if err != nil {
		t.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	return f
}

// nodeLister is the snapshot's node list (what fitError counts).
type nodeLister struct{ infos []fwktype.NodeInfo }

func newNodeLister(nodes ...*corev1.Node) *nodeLister {
	l := &nodeLister{}
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		l.infos = append(l.infos, ni)
	}
	return l
}

func (l *nodeLister) NodeInfos() fwktype.NodeInfoLister       { return l }
func (l *nodeLister) StorageInfos() fwktype.StorageInfoLister { return l }
func (l *nodeLister) IsPVCUsedByPods(string) bool             { return false }
func (l *nodeLister) List() ([]fwktype.NodeInfo, error)       { return l.infos, nil }
func (l *nodeLister) HavePodsWithAffinityList() ([]fwktype.NodeInfo, error) {
	return nil, nil
}
func (l *nodeLister) HavePodsWithRequiredAntiAffinityList() ([]fwktype.NodeInfo, error) {
	return nil, nil
}
func (l *nodeLister) Get(name string) (fwktype.NodeInfo, error) {
	for _, ni := range l.infos {
		if ni.Node().Name == name {
			return ni, nil
		}
	}
	return nil, fmt.Errorf("node %s not found", name)
}

func podGroup(ns, name string, min int32) *v1alpha1.PodGroup {
	timeout := int32(10)
	return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		CreationTimestamp: metav1.Time{Time: start.Add(-time.Minute)}},
		Spec: v1alpha1.PodGroupSpec{MinMember: min, ScheduleTimeoutSeconds: &timeout}}
}

func gangPod(ns, name, gang string) *corev1.Pod {
	return st.MakePod().Namespace(ns).Name(name).UID(name+"-uid").
		Label(v1alpha1.PodGroupLabel, gang).Obj()
}

// brief is the part of a record the tests compare.
func brief(r Record) string {
	s := fmt.Sprintf("%s %s %s %s/%s", r.Stage, r.Status, r.Reason, r.Pod.Namespace, r.Pod.Name)
	if r.Event != "" {
		s += " event=" + r.Event
	}
	if r.Round != nil {
		s += fmt.Sprintf(" round=%d", *r.Round)
	}
	if r.RoundsSkipped != 0 {
		s += fmt.Sprintf(" skipped=%d", r.RoundsSkipped)
	}
	return s
}

func briefs(rs []Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = brief(r)
	}
	return out
}

func expect(t *testing.T, what string, got []Record, want ...string) {
	t.Helper()
	b := briefs(got)
	if fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, b, want)
	}
}

func unschedulable(reason string) *framework.NodeToStatus {
	m := framework.NewDefaultNodeToStatus()
	m.Set("n-1", fwktype.NewStatus(fwktype.Unschedulable, reason))
	return m
}

func TestAPodOfNoGangIsKoordinatorsAlone(t *testing.T) {
	plain := st.MakePod().Namespace("ns").Name("solo").UID("solo").Obj()
	f := newFixture(t, time.Second, nil, []*corev1.Pod{plain})
	ctx := context.Background()
	state := framework.NewCycleState()
	if st := f.shim.PreEnqueue(ctx, plain); !st.IsSuccess() {
		t.Fatalf("PreEnqueue: %v", st)
	}
	f.shim.BeforePreFilter(ctx, state, plain)
	f.shim.PostFilter(ctx, state, plain, unschedulable("Insufficient cpu"))
	f.shim.AfterPostFilter(ctx, state, plain, unschedulable("Insufficient cpu"))
	f.shim.Permit(ctx, state, plain, "n-1")
	f.shim.Unreserve(ctx, state, plain, "n-1")
	f.shim.PostBind(ctx, state, plain, "n-1")
	if p := f.shim.NextPod(); p != nil {
		t.Fatalf("NextPod without a round: %v", p.Name)
	}
	expect(t, "records of a pod of no gang", f.rec.take())
}

func TestARoundThatCannotFit(t *testing.T) {
	p0, p1 := gangPod("ns", "p-0", "g"), gangPod("ns", "p-1", "g")
	f := newFixture(t, time.Second, []*v1alpha1.PodGroup{podGroup("ns", "g", 2)}, []*corev1.Pod{p0, p1})
	ctx := context.Background()

	// the first member becomes the representative; the second waits for the round
	if st := f.shim.PreEnqueue(ctx, p0); !st.IsSuccess() {
		t.Fatalf("PreEnqueue p-0: %v", st)
	}
	if st := f.shim.PreEnqueue(ctx, p1); st.IsSuccess() {
		t.Fatal("PreEnqueue p-1 passes while p-0 represents the group")
	}
	recs := f.rec.take()
	expect(t, "PreEnqueue", recs,
		"PreEnqueue Success  ns/p-0",
		"PreEnqueue Success RepresentativeRecorded ns/p-0 event=RepresentativeRecorded",
		"PreEnqueue UnschedulableAndUnresolvable GangRepresentative ns/p-1")
	if recs[0].Code != "Success" || recs[2].Code != "UnschedulableAndUnresolvable" ||
		recs[2].Representative == nil || *recs[2].Representative != "ns/p-0" ||
		recs[0].ObservedAt != "2026-12-02T04:00:00.000000Z" || recs[0].Shim != "shim-test" ||
		recs[0].Gang != "ns/g" || recs[0].GangGroup != "ns/g" || recs[0].Pod.UID != "p-0-uid" {
		t.Fatalf("PreEnqueue records: %+v", recs)
	}

	// the representative opens the round
	state := framework.NewCycleState()
	if _, _, st := f.shim.BeforePreFilter(ctx, state, p0); !st.IsSuccess() {
		t.Fatalf("BeforePreFilter p-0: %v", st)
	}
	expect(t, "BeforePreFilter", f.rec.take(),
		"PreFilter Success RoundOpened ns/p-0 event=RoundOpened round=0",
		"PreEnqueue Success RepresentativeCleared ns/p-0 event=RepresentativeCleared")

	// p-0 does not fit: it is the culprit
	f.shim.PostFilter(ctx, state, p0, unschedulable("Insufficient cpu"))
	recs = f.rec.take()
	expect(t, "PostFilter", recs, "Filter Unschedulable Insufficient cpu ns/p-0 round=0")
	r := recs[0]
	if *r.Culprit != "ns/p-0" || *r.FitError != "0/1 nodes are available: 1 Insufficient cpu." ||
		*r.AlreadyWaitForBound != 0 {
		t.Fatalf("PostFilter record: %+v", r)
	}
	if _, err := state.Read(postFilterReached); err != nil {
		t.Fatal("PostFilter marks the cycle state")
	}
	f.shim.AfterPostFilter(ctx, state, p0, unschedulable("Insufficient cpu"))
	expect(t, "AfterPostFilter with nobody waiting", f.rec.take())

	// NextPod hands out the other member, then nothing: the round closes
	next := f.shim.NextPod()
	if next == nil || next.Name != "p-1" {
		t.Fatalf("NextPod: %v", next)
	}
	expect(t, "NextPod", f.rec.take(), "PreFilter Success MemberHandedOut ns/p-1 event=MemberHandedOut round=0")
	state1 := framework.NewCycleState()
	if _, _, st := f.shim.BeforePreFilter(ctx, state1, next); st.IsSuccess() {
		t.Fatal("a later member of a failed round is refused at BeforePreFilter")
	}
	recs = f.rec.take()
	expect(t, "BeforePreFilter of a later member", recs,
		"PreFilter UnschedulableAndUnresolvable GangGroupRejected ns/p-1 round=0")
	if recs[0].Culprit == nil || *recs[0].Culprit != "ns/p-0" || recs[0].FitError == nil {
		t.Fatalf("the refusal carries the round's culprit: %+v", recs[0])
	}
	for f.shim.NextPod() != nil {
		f.rec.take()
	}
	expect(t, "the round closed", f.rec.take(),
		"PreFilter Success RoundClosed ns/p-0 event=RoundClosed round=0")
	if f.shim.rounds.Current() != nil {
		t.Fatal("no round is open after the close")
	}
	if p := f.shim.NextPod(); p != nil {
		t.Fatalf("NextPod with no round: %v", p.Name)
	}
}

func TestRepeatedRoundsAreSampledWithTheInjectedClock(t *testing.T) {
	p0 := gangPod("ns", "p-0", "g")
	f := newFixture(t, time.Second, []*v1alpha1.PodGroup{podGroup("ns", "g", 1)}, []*corev1.Pod{p0})
	ctx := context.Background()
	// one round: PreEnqueue, the round opened, the member fails, NextPod until the round closes;
	// returns the records of the round itself (from RoundOpened on)
	round := func() []Record {
		f.shim.PreEnqueue(ctx, p0)
		f.rec.take()
		state := framework.NewCycleState()
		f.shim.BeforePreFilter(ctx, state, p0)
		f.shim.PostFilter(ctx, state, p0, unschedulable("Insufficient cpu"))
		f.shim.AfterPostFilter(ctx, state, p0, unschedulable("Insufficient cpu"))
		for f.shim.NextPod() != nil {
		}
		return f.rec.take()
	}
	first := round()
	if len(first) < 3 || first[0].Event != "RoundOpened" || first[len(first)-1].Event != "RoundClosed" {
		t.Fatalf("the first round is reported in detail: %q", briefs(first))
	}
	f.clock.advance(100 * time.Millisecond)
	if got := round(); len(got) != 0 {
		t.Fatalf("a round within the interval is sampled out: %q", briefs(got))
	}
	f.clock.advance(100 * time.Millisecond)
	round()
	f.clock.advance(time.Second)
	got := round()
	var opened, failed *Record
	for i := range got {
		switch {
		case got[i].Event == "RoundOpened":
			opened = &got[i]
		case got[i].Stage == "Filter":
			failed = &got[i]
		}
	}
	if opened == nil || failed == nil || opened.RoundsSkipped != 2 || failed.RoundsSkipped != 2 {
		t.Fatalf("the next detailed round carries the 2 rounds skipped: %q", briefs(got))
	}
	// while rounds keep coming the group is quiet, PreEnqueue included; once they stopped for
	// two intervals it is reported again
	f.clock.advance(100 * time.Millisecond)
	round()
	f.clock.advance(time.Second)
	f.shim.PreEnqueue(ctx, p0)
	if got := f.rec.take(); len(got) != 0 {
		t.Fatalf("PreEnqueue of a group whose rounds keep coming is sampled out: %q", briefs(got))
	}
	f.clock.advance(2 * time.Second)
	f.shim.PreEnqueue(ctx, p0)
	if got := f.rec.take(); len(got) == 0 || got[0].Stage != "PreEnqueue" {
		t.Fatalf("PreEnqueue of a group no longer retried is reported: %q", briefs(got))
	}
}

func TestPermitUnreserveAndPostBind(t *testing.T) {
	p0 := gangPod("ns", "p-0", "g")
	f := newFixture(t, time.Second, []*v1alpha1.PodGroup{podGroup("ns", "g", 1)}, []*corev1.Pod{p0})
	ctx := context.Background()
	f.shim.PreEnqueue(ctx, p0)
	state := framework.NewCycleState()
	f.shim.BeforePreFilter(ctx, state, p0)
	f.rec.take()
	status, _ := f.shim.Permit(ctx, state, p0, "n-1")
	if !status.IsSuccess() {
		t.Fatalf("Permit of a gang of one: %v", status)
	}
	recs := f.rec.take()
	expect(t, "Permit", recs, "Permit Success Coscheduling ns/p-0 event=Allowed round=0")
	if *recs[0].Node != "n-1" || f.shim.rounds.Current() != nil {
		t.Fatalf("Permit allowed closes the round: %+v", recs[0])
	}
	f.shim.Unreserve(ctx, state, p0, "n-1")
	recs = f.rec.take()
	expect(t, "Unreserve", recs, "Unreserve Rejected GangGroupRejected ns/p-0")
	if recs[0].Message != `Gang "ns/g" gets rejected due to Pod "p-0" in Unreserve` {
		t.Fatalf("Unreserve message: %q", recs[0].Message)
	}
	f.shim.PostBind(ctx, state, p0, "n-1")
	recs = f.rec.take()
	if len(recs) == 0 || brief(recs[0]) != "Bind Bound  ns/p-0" ||
		recs[0].Message != "Successfully assigned ns/p-0 to n-1" {
		t.Fatalf("PostBind: %q", briefs(recs))
	}
}

func TestAfterPostFilterWithoutPostFilterMarksThePodNominated(t *testing.T) {
	p0 := gangPod("ns", "p-0", "g")
	f := newFixture(t, time.Second, []*v1alpha1.PodGroup{podGroup("ns", "g", 1)}, []*corev1.Pod{p0})
	ctx := context.Background()
	f.shim.AfterPostFilter(ctx, framework.NewCycleState(), p0, unschedulable("Insufficient cpu"))
	if !f.shim.pre.Marked["ns/p-0"] {
		t.Fatal("DefaultPreemption ended PostFilter: the pod counts as nominated")
	}
	never := corev1.PreemptNever
	p0.Spec.PreemptionPolicy = &never
	f.shim.pre.Forget([]string{"ns/p-0"})
	f.shim.AfterPostFilter(ctx, framework.NewCycleState(), p0, unschedulable("Insufficient cpu"))
	if f.shim.pre.Marked["ns/p-0"] {
		t.Fatal("a pod whose preemption policy is Never is never nominated")
	}
}

func TestCommandsAppliedAtPreEnqueue(t *testing.T) {
	p0, p1 := gangPod("ns", "p-0", "g"), gangPod("ns", "p-1", "g")
	f := newFixture(t, time.Second, []*v1alpha1.PodGroup{podGroup("ns", "g", 2)}, []*corev1.Pod{p0, p1})
	ctx := context.Background()
	f.shim.PreEnqueue(ctx, p0)
	f.rec.take()
	f.shim.ready = true
	committed := 0
	cmd := `{"schema":"gangstate.command/v1","id":"ns/g#7","type":"SwitchRepresentative",` +
		`"gang_group":"ns/g","epoch":7,"representative":"ns/p-1","expected_representative":"ns/p-0"}`
	f.shim.onCommand([]byte(cmd), func() { committed++ })
	f.shim.onCommand([]byte(`not json`), func() { committed++ })
	if committed != 1 {
		t.Fatalf("an invalid command is committed at once, a valid one waits: %d", committed)
	}
	f.shim.PreEnqueue(ctx, p1)
	var ack *fencing.Ack
	f.rec.mu.Lock()
	for i, raw := range f.rec.raw {
		if f.rec.recs[i].Schema == fencing.AckSchema {
			var a fencing.Ack
			if err := json.Unmarshal([]byte(raw), &a); err != nil {
				t.Fatal(err)
			}
			ack = &a
			if f.rec.keys[i] != "ns/g" {
				t.Fatalf("the ack is keyed by the gang group: %q", f.rec.keys[i])
			}
		}
	}
	f.rec.mu.Unlock()
	if ack == nil || ack.Outcome != fencing.Applied || *ack.Representative != "ns/p-1" ||
		ack.Shim != "shim-test" || ack.ObservedAt != "2026-12-02T04:00:00.000000Z" {
		t.Fatalf("ack: %+v", ack)
	}
	if committed != 2 {
		t.Fatalf("the command's offset is committed once its ack is delivered: %d", committed)
	}
	if rep := f.shim.representative([]string{"ns/g"}); rep != "ns/p-1" {
		t.Fatalf("the representative in Koordinator's gang cache: %q", rep)
	}
	waitFor(t, "the new representative is activated", func() bool {
		return fmt.Sprint(f.act.activated()) == "[ns/p-1]"
	})
	// the same id again: answered before, committed at once, no second ack
	f.rec.take()
	f.shim.onCommand([]byte(cmd), func() { committed++ })
	f.shim.PreEnqueue(ctx, p0)
	for _, r := range f.rec.take() {
		if r.Schema == fencing.AckSchema {
			t.Fatal("a command answered before is not acked again")
		}
	}
	if committed != 3 {
		t.Fatalf("a duplicate is committed at once: %d", committed)
	}
}

func TestWhatAGroupLeftBehindIsForgottenWhenItLeavesTheGangCache(t *testing.T) {
	a0, b0 := gangPod("ns", "a-0", "a"), gangPod("ns", "b-0", "b")
	f := newFixture(t, time.Second, []*v1alpha1.PodGroup{podGroup("ns", "a", 1), podGroup("ns", "b", 1)},
		[]*corev1.Pod{a0, b0})
	ctx := context.Background()
	for _, p := range []*corev1.Pod{a0, b0} {
		f.shim.PreEnqueue(ctx, p)
		state := framework.NewCycleState()
		f.shim.BeforePreFilter(ctx, state, p)
		f.shim.PostFilter(ctx, state, p, unschedulable("Insufficient cpu"))
		for f.shim.NextPod() != nil {
		}
	}
	f.shim.PreEnqueue(ctx, a0) // a's representative recorded again, its round open
	f.shim.BeforePreFilter(ctx, framework.NewCycleState(), a0)
	f.shim.mu.Lock()
	f.shim.state.Decide(fencing.Command{ID: "ns/a#3", GangGroup: "ns/a", Epoch: 3}, "", nil, nil)
	f.shim.state.Buffer(fencing.Command{ID: "ns/b#4", GangGroup: "ns/b", Epoch: 4})
	f.shim.mu.Unlock()
	if got := f.shim.forgetGone(); len(got) != 0 {
		t.Fatalf("nothing is forgotten while the gangs are cached: %v", got)
	}

	for _, g := range []string{"a", "b"} {
		if err := f.pgs.SchedulingV1alpha1().PodGroups("ns").Delete(ctx, g, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the gangs leave Koordinator's gang cache", func() bool {
		return !f.shim.inCache([]string{"ns/a"}) && !f.shim.inCache([]string{"ns/b"})
	})
	if got := f.shim.forgetGone(); fmt.Sprint(got) != "[ns/a]" {
		t.Fatalf("forgotten: %v (ns/b still has a command to answer)", got)
	}
	f.shim.mu.Lock()
	_, repA := f.shim.reps["ns/a"]
	answered := f.shim.state.Answered["ns/a#3"]
	fence := f.shim.state.Fence("ns/a")
	groups := f.shim.rounds.Groups()
	f.shim.mu.Unlock()
	if repA || answered || fmt.Sprint(groups) != "[ns/b]" || fence != 3 {
		t.Fatalf("after forgetting ns/a: rep %v answered %v rounds %v fence %d", repA, answered,
			groups, fence)
	}
	// the sweep answers ns/b's command (no pending member: PreconditionFailed), then it goes too
	f.shim.ready = true
	f.shim.sweepOnce()
	if got := f.shim.forgetGone(); fmt.Sprint(got) != "[ns/b]" {
		t.Fatalf("forgotten after its command was answered: %v", got)
	}
	f.shim.mu.Lock()
	defer f.shim.mu.Unlock()
	if len(f.shim.reps) != 0 || len(f.shim.rounds.Groups()) != 0 || len(f.shim.state.Answered) != 0 ||
		len(f.shim.activated) != 0 || len(f.shim.commit) != 0 || f.shim.rounds.Current() != nil {
		t.Fatalf("left behind: reps %v rounds %v answered %v activated %v commit %v",
			f.shim.reps, f.shim.rounds.Groups(), f.shim.state.Answered, f.shim.activated, f.shim.commit)
	}
}

// waitFor polls cond (every 10 ms, at most 10 s): informer events arrive asynchronously.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTheRecordsJSONShapeIsUnchanged(t *testing.T) {
	round, waiting := int64(41), 2
	rep, node, culprit, fit := "ns/p-0", "n-1", "ns/p-1", "0/1 nodes are available: 1 Insufficient cpu."
	full := Record{Schema: CycleSchema, ObservedAt: "2026-12-02T04:00:00.000000Z",
		Scheduler: SchedulerName, Shim: "s", Cycle: 41, Pod: PodRef{"ns", "p-1", "u"}, Gang: "ns/g",
		GangGroup: "ns/g", Stage: "Filter", Status: "Unschedulable", Reason: "Insufficient cpu",
		Message: fit, Representative: &rep, Node: &node, Culprit: &culprit, FitError: &fit,
		AlreadyWaitForBound: &waiting, Round: &round, RoundsSkipped: 3, Event: "E", Code: "C"}
	raw, _ := json.Marshal(full)
	want := `{"schema":"gangstate.cycle/v1","observed_at":"2026-12-02T04:00:00.000000Z",` +
		`"scheduler":"koord-scheduler","shim":"s","cycle":41,"pod":{"namespace":"ns","name":"p-1",` +
		`"uid":"u"},"gang":"ns/g","gang_group":"ns/g","stage":"Filter","status":"Unschedulable",` +
		`"reason":"Insufficient cpu","message":"0/1 nodes are available: 1 Insufficient cpu.",` +
		`"representative":"ns/p-0","node":"n-1","culprit":"ns/p-1",` +
		`"fit_error":"0/1 nodes are available: 1 Insufficient cpu.","already_wait_for_bound":2,` +
		`"round":41,"rounds_skipped":3,"event":"E","code":"C"}`
	if string(raw) != want {
		t.Fatalf("full record:\n got  %s\n want %s", raw, want)
	}
	raw, _ = json.Marshal(Record{Schema: CycleSchema})
	want = `{"schema":"gangstate.cycle/v1","observed_at":"","scheduler":"","shim":"","cycle":0,` +
		`"pod":{"namespace":"","name":"","uid":""},"gang":"","gang_group":"","stage":"","status":"",` +
		`"reason":"","message":"","representative":null,"node":null}`
	if string(raw) != want {
		t.Fatalf("bare record:\n got  %s\n want %s", raw, want)
	}
}

func TestPreEnqueueReasonsAndDominantReason(t *testing.T) {
	for msg, want := range map[string]string{
		"can't find gang, gangName: ns/g":                              "GangNotFound",
		"gang has not init, gangName: g":                               "GangNotInitialized",
		"gang basic check not pass":                                    "GangBasicCheckUnsatisfied",
		"gang group is scheduling and this pod has not been attempted": "GangGroupScheduling",
		"representative pod ns/p-0 exists":                             "GangRepresentative",
		"something else":                                               "PreEnqueue",
	} {
		if got := preEnqueueReason(msg); got != want {
			t.Errorf("%q: %s, want %s", msg, got, want)
		}
	}
	if got := dominantReason("0/3 nodes are available: 1 node(s) had taint, 2 Insufficient nvidia.com/gpu."); got != "Insufficient nvidia.com/gpu" {
		t.Errorf("dominant: %s", got)
	}
	if got := dominantReason("no fit error"); got != "FailedScheduling" {
		t.Errorf("none: %s", got)
	}
}
