// Package gangshim wraps Koordinator v1.8.0's Coscheduling plugin, under the same plugin name,
// so that koord-scheduler reports to gangstate what the API server never shows and applies
// gangstate's commands.
//
// K = github.com/koordinator-sh/koordinator@v1.8.0/pkg/scheduler/plugins/coscheduling/.
// Every hook calls Koordinator's own method first (or around it) and never changes its result;
// what it reports is written by report.go, the rounds are kept by the pure tracker of rounds.go,
// the commands are applied by commands.go, and what the shim remembers of a gang group is
// dropped once the group leaves Koordinator's gang cache (evict.go):
//   - PreEnqueue (K coscheduling.go:122-128, core/core.go:198-241): a cycle record per outcome
//     (status Gated for a refusal, the framework code in "code", Koordinator's message), and
//     the representative recorded or cleared (K core/gang.go:572-586, core/ganggroup.go:144-167).
//     It is also an apply point for commands (the group's next PreEnqueue).
//   - BeforePreFilter (K coscheduling.go:148-155, core/core.go:286-341): a round (gang
//     scheduling context) opened by the representative (core/core.go:318-334), or a refusal of
//     a later member with the round's cached failure (core/core.go:336-339).
//   - NextPod (K coscheduling.go:130-132, core/core.go:150-190): a member handed out, or the
//     round closed with its waiting members rejected (core/core.go:186-187).
//   - PostFilter (K coscheduling.go:172-174): the member's own fit error (the culprit), with the
//     group's members waiting at Permit (Koordinator's alreadyWaitForBound, core/core.go:376-381).
//   - AfterPostFilter (K coscheduling.go:165-167; run after every PostFilter plugin by
//     frameworkext framework_extender.go:442-455): the waiting members released, then the
//     second apply point for commands (never inside PostFilter).
//   - Permit (K coscheduling.go:200-219): Wait, or Success when the group is allowed.
//   - Unreserve (K coscheduling.go:229-231) and PostBind (K coscheduling.go:281-283).
//
// Cycle numbers: the scheduling queue's counter (kube-scheduler SchedulingQueue.SchedulingCycle,
// reached through frameworkext scheduler_adapter.go:172-174). Members that NextPod hands out do
// not pass the queue's Pop (frameworkext framework_extender_factory.go:237-258), so every
// attempt of one round carries the round's cycle number: a round is one cycle.
package gangshim

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	fwktype "k8s.io/kube-scheduler/framework"

	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling/core"

	"gangstate.local/shim/bus"
	"gangstate.local/shim/fencing"
)

// Name is Coscheduling's own name: the profile enables it as it enables Coscheduling.
const Name = coscheduling.Name

// SchedulerName is written into every record's "scheduler" field.
const SchedulerName = "koord-scheduler"

// EvictEvery is how often the shim drops what it remembers of gang groups that left
// Koordinator's gang cache (forgetGone).
const EvictEvery = 10 * time.Second

var registerOnce sync.Once

// publisher is where records go (bus.Publisher in the scheduler; a recorder in tests).
type publisher interface {
	Publish(key, schema string, value any, done func(error)) bool
}

// Shim is the wrapped plugin: every Coscheduling method is promoted from the embedded plugin,
// the hooks above are overridden. Each hook runs Koordinator's and hands the outcome to the
// reporting (report.go), the round tracker (rounds.go) and the commands (commands.go).
type Shim struct {
	*coscheduling.Coscheduling
	handle fwktype.Handle
	mgr    *core.PodGroupManager
	pub    publisher
	cfg    bus.Config
	now    func() time.Time // the clock of observed_at and of round sampling

	mu        sync.Mutex
	state     *fencing.State
	ready     bool                 // fences recovered; commands may be decided
	reps      map[string]string    // gang group id -> representative last published
	rounds    *Rounds              // the open round and the sampling of repeated rounds
	commit    map[string][]func()  // command id -> offset commits waiting for its ack
	activated map[string]bool      // command id -> its target was activated once (sweep)
	pre       *fencing.Preemptions // members in a preemption (see nominatedLocked)
	holds     *fencing.Holds       // gang groups held by gangstate (holds.go)
	// namespaces is the scheduler's namespace lister (the annotation gangstate.io/hold)
	namespaces corelisters.NamespaceLister
}

// New builds Koordinator's Coscheduling and wraps it, configured from the environment
// (bus.Parse: KAFKA_BOOTSTRAP_SERVERS, KAFKA_SECURITY_PROTOCOL, ...; docs/shim.md). A bad value
// is New's error, of one line. Without KAFKA_BOOTSTRAP_SERVERS the shim publishes nothing and
// consumes nothing: New returns Koordinator's plugin itself (Coscheduling as shipped; the
// shim's metrics are still registered, at zero).
func New(ctx context.Context, obj runtime.Object, handle fwktype.Handle) (fwktype.Plugin, error) {
	cfg, err := bus.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("gangstate shim: %w", err)
	}
	inner, err := coscheduling.New(ctx, obj, handle)
	if err != nil {
		return nil, err
	}
	registerOnce.Do(func() {
		for _, c := range bus.Collectors() {
			legacyregistry.RawMustRegister(c)
		}
	})
	for _, d := range cfg.Deprecated {
		klog.InfoS("gangstate shim: deprecated variable", "variable", d)
	}
	cs := inner.(*coscheduling.Coscheduling)
	if len(cfg.Bootstrap) == 0 {
		// Koordinator's plugin itself: no hook of the shim runs on a scheduling cycle
		klog.InfoS("gangstate shim: KAFKA_BOOTSTRAP_SERVERS is empty; publishing nothing")
		return cs, nil
	}
	pub, err := bus.NewPublisher(cfg)
	if err != nil {
		return nil, fmt.Errorf("gangstate shim: kafka: %w", err)
	}
	s, err := newShim(cs, handle, cfg, pub, time.Now)
	if err != nil {
		return nil, err
	}
	klog.InfoS("gangstate shim: publishing", "topic", cfg.GangEvents(), "shim", cfg.ShimID,
		"cluster", cfg.Cluster, "commands", cfg.Commands, "consumerGroup", cfg.ConsumerGroup(), "security", cfg.Security.Protocol)
	go s.evictLoop(EvictEvery)
	if cfg.Commands {
		go s.commandLoop()
	}
	return s, nil
}

// newShim wraps cs, publishing into pub with the clock now (no goroutine started).
func newShim(cs *coscheduling.Coscheduling, handle fwktype.Handle, cfg bus.Config, pub publisher,
	now func() time.Time) (*Shim, error) {
	mgr, err := managerOf(cs)
	if err != nil {
		return nil, err
	}
	s := &Shim{Coscheduling: cs, handle: handle, mgr: mgr, pub: pub, cfg: cfg, now: now,
		state: fencing.NewState(), reps: map[string]string{},
		rounds: NewRounds(cfg.RoundInterval, now), commit: map[string][]func(){},
		activated: map[string]bool{}, pre: fencing.NewPreemptions(), holds: fencing.NewHolds()}
	if f := handle.SharedInformerFactory(); f != nil {
		// asked for while the plugins are built, so the scheduler starts it with the others
		// (InterPodAffinity reads the same informer; system:kube-scheduler may list and watch
		// namespaces)
		s.namespaces = f.Core().V1().Namespaces().Lister()
	}
	return s, nil
}

// managerOf reaches the PodGroupManager Koordinator's plugin keeps in its unexported field
// pgMgr (K coscheduling.go:51), so that the shim reads the same gang cache the plugin decides
// with (no second cache).
func managerOf(cs *coscheduling.Coscheduling) (*core.PodGroupManager, error) {
	f := reflect.ValueOf(cs).Elem().FieldByName("pgMgr")
	if !f.IsValid() {
		return nil, fmt.Errorf("gangstate shim: Coscheduling has no pgMgr field (not v1.8.0?)")
	}
	m := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
	mgr, ok := m.(*core.PodGroupManager)
	if !ok {
		return nil, fmt.Errorf("gangstate shim: pgMgr is %T, not *core.PodGroupManager", m)
	}
	return mgr, nil
}

// -- hooks: each runs Koordinator's and hands its outcome on (report.go) ------------------------

// PreEnqueue applies the group's buffered commands (an apply point), then refuses the pod of a
// gang group gangstate holds (holds.go; Koordinator's PreEnqueue is not run for it), else runs
// Koordinator's PreEnqueue (K coscheduling.go:122-128); and reports it.
func (s *Shim) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwktype.Status {
	m := s.memberOf(pod)
	s.applyAt(m) // the scheduling queue's lock is held here: pods are activated asynchronously
	if st := s.heldRefusal(m, "PreEnqueue"); st != nil {
		s.reportHeld(m, "PreEnqueue", st)
		return st
	}
	st := s.Coscheduling.PreEnqueue(ctx, pod)
	s.preEnqueued(m, st)
	return st
}

// BeforePreFilter refuses the pod of a held gang group (already in the queue when the hold
// came, or handed out by NextPod) without running Koordinator's, so no round opens; else it
// runs Koordinator's (K coscheduling.go:148-155) and reports a round opened (the representative
// passed: core/core.go:318-334) or a refusal.
func (s *Shim) BeforePreFilter(ctx context.Context, state fwktype.CycleState, pod *v1.Pod) (*v1.Pod, bool, *fwktype.Status) {
	m := s.memberOf(pod)
	if st := s.heldRefusal(m, "BeforePreFilter"); st != nil {
		state.Write(heldInCycle, reached{})
		s.reportHeld(m, "PreFilter", st)
		return nil, false, st
	}
	wasRep := m.isGang() && s.representative(m.gangs) == m.key
	p, ok, st := s.Coscheduling.BeforePreFilter(ctx, state, pod)
	s.beforePreFiltered(m, wasRep, st)
	return p, ok, st
}

// NextPod runs Koordinator's (K coscheduling.go:130-132) and reports a member handed out, or
// the open round closed with its waiting members rejected (K core/core.go:186-187).
func (s *Shim) NextPod() *v1.Pod {
	open := s.openRound() // before Koordinator may close it
	pod := s.Coscheduling.NextPod()
	s.nextPodDone(open, pod)
	return pod
}

// PostFilter reports the member's own fit error (it is the round's culprit; nothing for a pod
// the hold refused in this cycle) and runs Koordinator's PostFilter (K coscheduling.go:172-174).
func (s *Shim) PostFilter(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, m fwktype.NodeToStatusReader) (*fwktype.PostFilterResult, *fwktype.Status) {
	if _, err := state.Read(heldInCycle); err == nil {
		state.Write(postFilterReached, reached{}) // DefaultPreemption nominated nobody
	} else {
		s.postFiltering(s.memberOf(pod), state, m)
	}
	return s.Coscheduling.PostFilter(ctx, state, pod, m)
}

// AfterPostFilter runs Koordinator's (K coscheduling.go:165-167: in Strict mode it rejects the
// group's waiting members, core/core.go:362-385), reports those releases, then applies the
// group's buffered commands: the point after every PostFilter plugin (frameworkext
// framework_extender.go:442-455), never inside PostFilter.
func (s *Shim) AfterPostFilter(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, m fwktype.NodeToStatusReader) {
	mb := s.memberOf(pod)
	before := s.waitingOf(mb.gangs)
	s.Coscheduling.AfterPostFilter(ctx, state, pod, m)
	s.afterPostFiltered(mb, state, before)
	s.applyAt(mb)
}

// Permit runs Koordinator's (K coscheduling.go:200-219) and reports Wait or the group allowed.
func (s *Shim) Permit(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, nodeName string) (*fwktype.Status, time.Duration) {
	st, wait := s.Coscheduling.Permit(ctx, state, pod, nodeName)
	s.permitted(s.memberOf(pod), nodeName, st, wait)
	return st, wait
}

// Unreserve runs Koordinator's (K coscheduling.go:229-231, core/core.go:456-475) and reports
// the release.
func (s *Shim) Unreserve(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, nodeName string) {
	s.Coscheduling.Unreserve(ctx, state, pod, nodeName)
	s.unreserved(s.memberOf(pod), nodeName)
}

// PostBind runs Koordinator's (K coscheduling.go:281-283: the group becomes once satisfied,
// core/core.go:506-517) and reports the binding.
func (s *Shim) PostBind(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, nodeName string) {
	s.Coscheduling.PostBind(ctx, state, pod, nodeName)
	s.bound(s.memberOf(pod), nodeName)
}
