// Package gangshim wraps Koordinator v1.8.0's Coscheduling plugin, under the same plugin name,
// so that koord-scheduler reports to gangstate what the API server never shows and applies
// gangstate's commands.
//
// K = github.com/koordinator-sh/koordinator@v1.8.0/pkg/scheduler/plugins/coscheduling/.
// Every hook calls Koordinator's own method first (or around it) and never changes its result:
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
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	fwktype "k8s.io/kube-scheduler/framework"

	"github.com/koordinator-sh/koordinator/pkg/scheduler/frameworkext"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling/core"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling/util"

	"gangstate.local/shim/bus"
	"gangstate.local/shim/fencing"
)

// Name is Coscheduling's own name: the profile enables it as it enables Coscheduling.
const Name = coscheduling.Name

// SchedulerName is written into every record's "scheduler" field.
const SchedulerName = "koord-scheduler"

var registerOnce sync.Once

// Shim is the wrapped plugin: every Coscheduling method is promoted from the embedded plugin,
// the hooks above are overridden.
type Shim struct {
	*coscheduling.Coscheduling
	handle fwktype.Handle
	mgr    *core.PodGroupManager
	pub    *bus.Publisher
	cfg    bus.Config

	mu     sync.Mutex
	state  *fencing.State
	ready  bool                 // fences recovered; commands may be decided
	reps   map[string]string    // gang group id -> representative last published
	rounds map[string]*round    // gang group id -> the open round
	commit map[string][]func()  // command id -> offset commits waiting for its ack
	pre    *fencing.Preemptions // members in a preemption (see nominatedLocked)

	// sampling of repeated rounds (see sampleRound)
	interval   time.Duration
	lastRound  map[string]time.Time // gang group id -> when its last detailed round opened
	skipped    map[string]int64     // gang group id -> rounds sampled out since then
	quiet      map[string]bool      // gang group id -> its current round is sampled out
	lastOpened map[string]time.Time // gang group id -> when its last round opened
}

type round struct {
	cycle   int64
	first   string
	culprit string
	fitErr  string
	skipped int64 // rounds sampled out before this one, reported once by its first failure or release
}

// New builds Koordinator's Coscheduling and wraps it. Without GANGSTATE_KAFKA_BOOTSTRAP the
// shim publishes nothing and consumes nothing: New returns Koordinator's plugin itself
// (Coscheduling as shipped; the shim's metrics are still registered, at zero).
func New(ctx context.Context, obj runtime.Object, handle fwktype.Handle) (fwktype.Plugin, error) {
	inner, err := coscheduling.New(ctx, obj, handle)
	if err != nil {
		return nil, err
	}
	cs := inner.(*coscheduling.Coscheduling)
	mgr, err := managerOf(cs)
	if err != nil {
		return nil, err
	}
	registerOnce.Do(func() {
		for _, c := range bus.Collectors() {
			legacyregistry.RawMustRegister(c)
		}
	})
	cfg, err := bus.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("gangstate shim: %w", err)
	}
	for _, d := range cfg.Deprecated {
		klog.InfoS("gangstate shim: deprecated variable", "variable", d)
	}
	if len(cfg.Bootstrap) == 0 {
		// Koordinator's plugin itself: no hook of the shim runs on a scheduling cycle
		klog.InfoS("gangstate shim: KAFKA_BOOTSTRAP_SERVERS is empty; publishing nothing")
		return cs, nil
	}
	s := &Shim{Coscheduling: cs, handle: handle, mgr: mgr, cfg: cfg,
		state: fencing.NewState(), reps: map[string]string{}, rounds: map[string]*round{},
		commit: map[string][]func(){}, pre: fencing.NewPreemptions(), interval: cfg.RoundInterval, lastRound: map[string]time.Time{},
		skipped: map[string]int64{}, quiet: map[string]bool{}, lastOpened: map[string]time.Time{}}
	if s.pub, err = bus.NewPublisher(s.cfg); err != nil {
		return nil, fmt.Errorf("gangstate shim: kafka: %w", err)
	}
	klog.InfoS("gangstate shim: publishing", "topic", s.cfg.GangEvents(), "shim", s.cfg.ShimID,
		"commands", s.cfg.Commands)
	if s.cfg.Commands {
		go s.commandLoop()
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

// -- records ------------------------------------------------------------------------------------

// Record is a gangstate.cycle/v1 record as the shim writes it (contracts.md): the optional
// fields shim (the shim's id, on every record it writes), round, rounds_skipped, event and code
// are the shim's.
type Record struct {
	Schema              string  `json:"schema"`
	ObservedAt          string  `json:"observed_at"`
	Scheduler           string  `json:"scheduler"`
	Shim                string  `json:"shim"`
	Cycle               int64   `json:"cycle"`
	Pod                 PodRef  `json:"pod"`
	Gang                string  `json:"gang"`
	GangGroup           string  `json:"gang_group"`
	Stage               string  `json:"stage"`
	Status              string  `json:"status"`
	Reason              string  `json:"reason"`
	Message             string  `json:"message"`
	Representative      *string `json:"representative"`
	Node                *string `json:"node"`
	Culprit             *string `json:"culprit,omitempty"`
	FitError            *string `json:"fit_error,omitempty"`
	AlreadyWaitForBound *int    `json:"already_wait_for_bound,omitempty"`
	Round               *int64  `json:"round,omitempty"`
	RoundsSkipped       int64   `json:"rounds_skipped,omitempty"`
	Event               string  `json:"event,omitempty"`
	Code                string  `json:"code,omitempty"`
}

// PodRef names a pod.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000Z") }

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Shim) cycle() int64 {
	if ext, ok := s.handle.(frameworkext.ExtendedHandle); ok && ext.Scheduler() != nil {
		return ext.Scheduler().GetSchedulingQueue().SchedulingCycle()
	}
	return 0
}

// gangOf returns the pod's gang id and gang group id ("" when the pod is no gang member).
func (s *Shim) gangOf(pod *v1.Pod) (string, string, []string) {
	if !util.IsPodNeedGang(pod) {
		return "", "", nil
	}
	gangID := util.GetId(pod.Namespace, util.GetGangNameByPod(pod))
	sum, ok := s.mgr.GetGangSummary(gangID)
	if !ok || sum == nil {
		return gangID, gangID, []string{gangID}
	}
	group := sum.GangGroup
	if len(group) == 0 {
		group = []string{gangID}
	}
	return gangID, util.GetGangGroupId(group), group
}

// representative is the group's representative in Koordinator's gang cache ("" = none), found
// with GangGroupInfo.IsRepresentative (K core/ganggroup.go:169-174) over the group's children.
func (s *Shim) representative(group []string) string {
	for _, gangID := range group {
		sum, ok := s.mgr.GetGangSummary(gangID)
		if !ok || sum == nil || sum.GangGroupInfo == nil {
			continue
		}
		for key := range sum.Children {
			if sum.GangGroupInfo.IsRepresentative(podOfKey(key)) {
				return key
			}
		}
	}
	return ""
}

// pending lists the group's pending members (ns/name, sorted) and their pods.
func (s *Shim) pending(group []string) ([]string, map[string]*v1.Pod) {
	pods := map[string]*v1.Pod{}
	for _, gangID := range group {
		for _, p := range s.mgr.GetAllPodsFromGang(gangID) {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				pods[util.GetId(p.Namespace, p.Name)] = p
			}
		}
	}
	keys := make([]string, 0, len(pods))
	for k := range pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, pods
}

func podOfKey(key string) *v1.Pod {
	ns, name, _ := strings.Cut(key, "/")
	p := &v1.Pod{}
	p.Namespace, p.Name = ns, name
	return p
}

// waitingOf lists the group's pods waiting at Permit (ns/name).
func (s *Shim) waitingOf(groupSet map[string]bool) []*v1.Pod {
	var out []*v1.Pod
	s.handle.IterateOverWaitingPods(func(wp fwktype.WaitingPod) {
		p := wp.GetPod()
		if util.IsPodNeedGang(p) && groupSet[util.GetId(p.Namespace, util.GetGangNameByPod(p))] {
			out = append(out, p)
		}
	})
	return out
}

func setOf(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// publish sends one record for pod (never blocks; see bus.Publisher).
func (s *Shim) publish(pod *v1.Pod, gangID, groupID string, group []string, stage, status,
	reason, message string, fill func(*Record)) {
	s.publishIf(false, pod, gangID, groupID, group, stage, status, reason, message, fill)
}

// publishIf publishes unless the group's current round is sampled out (always: publish anyway).
func (s *Shim) publishIf(always bool, pod *v1.Pod, gangID, groupID string, group []string, stage,
	status, reason, message string, fill func(*Record)) {
	if !always {
		s.mu.Lock()
		// a sampled-out round keeps the group quiet only while rounds keep coming
		q := s.quiet[groupID] && time.Since(s.lastOpened[groupID]) < 2*s.interval
		s.mu.Unlock()
		if q {
			bus.SampledOut.Inc()
			return
		}
	}
	rec := &Record{Schema: "gangstate.cycle/v1", ObservedAt: now(), Scheduler: SchedulerName,
		Shim:  s.cfg.ShimID,
		Cycle: s.cycle(), Pod: PodRef{pod.Namespace, pod.Name, string(pod.UID)}, Gang: gangID,
		GangGroup: groupID, Stage: stage, Status: status, Reason: reason, Message: message,
		Representative: strp(s.representative(group))}
	if fill != nil {
		fill(rec)
	}
	s.pub.Publish(gangID, "gangstate.cycle/v1", rec, nil)
}

// noteRepresentative publishes a record when the group's representative changed since the last
// one published (event RepresentativeRecorded or RepresentativeCleared).
func (s *Shim) noteRepresentative(pod *v1.Pod, gangID, groupID string, group []string, why string) {
	rep := s.representative(group)
	s.mu.Lock()
	old, known := s.reps[groupID]
	s.reps[groupID] = rep
	s.mu.Unlock()
	if known && old == rep || !known && rep == "" {
		return
	}
	event, status := "RepresentativeRecorded", "Success"
	if rep == "" {
		event = "RepresentativeCleared"
	}
	s.publish(pod, gangID, groupID, group, "PreEnqueue", status, event,
		fmt.Sprintf("representative %s -> %s (%s)", dash(old), dash(rep), why), func(r *Record) {
			r.Event = event
		})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// -- hooks --------------------------------------------------------------------------------------

// PreEnqueue runs Koordinator's PreEnqueue (K coscheduling.go:122-128) after applying the
// group's buffered commands (the group's next PreEnqueue is an apply point), and reports it.
func (s *Shim) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwktype.Status {
	gangID, groupID, group := s.gangOf(pod)
	if gangID != "" {
		// the scheduling queue's lock is held here: pods are activated asynchronously
		s.applyPoint(groupID, group)
	}
	st := s.Coscheduling.PreEnqueue(ctx, pod)
	if gangID == "" {
		return st
	}
	status, reason, msg := "Success", "", ""
	if !st.IsSuccess() {
		msg = st.Message()
		status, reason = "UnschedulableAndUnresolvable", preEnqueueReason(msg)
	}
	s.publishIf(false, pod, gangID, groupID, group, "PreEnqueue", status, reason, msg,
		func(r *Record) { r.Code = st.Code().String() })
	s.noteRepresentative(pod, gangID, groupID, group, "PreEnqueue")
	return st
}

// preEnqueueReason names Koordinator's PreEnqueue refusals (K core/core.go:202-240,
// core/gang.go:35-37) with the reasons of the scheduler message catalogue
// (producers/watch/scheduler_events.py, rows B1a, B1b, B1c, P7, P8).
func preEnqueueReason(msg string) string {
	switch {
	case strings.HasPrefix(msg, "can't find gang"):
		return "GangNotFound"
	case strings.HasPrefix(msg, "gang has not init"):
		return "GangNotInitialized"
	case strings.Contains(msg, "basic check"):
		return "GangBasicCheckUnsatisfied"
	case strings.Contains(msg, "is scheduling and this pod has not been attempted"):
		return "GangGroupScheduling"
	case strings.HasPrefix(msg, "representative pod"), strings.Contains(msg, "is not exists in gangCache"):
		return "GangRepresentative"
	}
	return "PreEnqueue"
}

// BeforePreFilter runs Koordinator's (K coscheduling.go:148-155) and reports a round opened
// (the representative passed: core/core.go:318-334) or a refusal.
func (s *Shim) BeforePreFilter(ctx context.Context, state fwktype.CycleState, pod *v1.Pod) (*v1.Pod, bool, *fwktype.Status) {
	gangID, groupID, group := s.gangOf(pod)
	wasRep := gangID != "" && s.representative(group) == util.GetId(pod.Namespace, pod.Name)
	p, ok, st := s.Coscheduling.BeforePreFilter(ctx, state, pod)
	if gangID == "" {
		return p, ok, st
	}
	cycle := s.cycle()
	key := util.GetId(pod.Namespace, pod.Name)
	if st.IsSuccess() {
		if wasRep && s.representative(group) == "" {
			rd := s.sampleRound(groupID, cycle, key)
			s.publish(pod, gangID, groupID, group, "PreFilter", "Success", "RoundOpened",
				"gang scheduling context opened by the representative", func(r *Record) {
					r.Event, r.Round, r.RoundsSkipped = "RoundOpened", &cycle, rd.skipped
				})
			s.noteRepresentative(pod, gangID, groupID, group, "gang group enters scheduling")
		}
		return p, ok, st
	}
	msg := st.Message()
	s.mu.Lock()
	rd := s.rounds[groupID]
	var culprit, fitErr string
	var rnum *int64
	if rd != nil {
		culprit, fitErr = rd.culprit, rd.fitErr
		c := rd.cycle
		rnum = &c
	}
	s.mu.Unlock()
	s.publish(pod, gangID, groupID, group, "PreFilter", "UnschedulableAndUnresolvable",
		"GangGroupRejected", msg, func(r *Record) {
			r.Round = rnum
			r.Culprit, r.FitError = strp(culprit), strp(fitErr)
			r.Code = st.Code().String()
		})
	return p, ok, st
}

// NextPod runs Koordinator's (K coscheduling.go:130-132): a member handed out, or, when the
// group had an open round and nothing is left, the round closed and its waiting members
// rejected with "all pending pods is already been attempted" (K core/core.go:186-187).
func (s *Shim) NextPod() *v1.Pod {
	s.mu.Lock()
	var openGroup string
	var rd *round
	for g, r := range s.rounds {
		openGroup, rd = g, r
	}
	s.mu.Unlock()
	var waiting []*v1.Pod
	var openGangs []string
	if rd != nil {
		openGangs = strings.Split(openGroup, ",")
		waiting = s.waitingOf(setOf(openGangs))
	}
	pod := s.Coscheduling.NextPod()
	if rd == nil {
		return pod
	}
	if pod != nil {
		gangID, groupID, group := s.gangOf(pod)
		c := rd.cycle
		s.publish(pod, gangID, groupID, group, "PreFilter", "Success", "MemberHandedOut",
			"NextPod hands out a pending member of the round", func(r *Record) {
				r.Event, r.Round = "MemberHandedOut", &c
			})
		return pod
	}
	s.mu.Lock()
	delete(s.rounds, openGroup)
	skipped := rd.skipped
	rd.skipped = 0
	s.mu.Unlock()
	c := rd.cycle
	for _, w := range waiting {
		gangID, groupID, group := s.gangOf(w)
		n := skipped
		skipped = 0
		s.publish(w, gangID, groupID, group, "Permit", "Rejected", "GangRoundEnded",
			core.ReasonAllPendingPodsIsAlreadyAttempted, func(r *Record) {
				r.Event, r.Round, r.RoundsSkipped = "RoundClosed", &c, n
			})
	}
	if len(waiting) == 0 && rd.first != "" {
		s.publish(podOfKey(rd.first), openGangs[0], openGroup, openGangs, "PreFilter", "Success",
			"RoundClosed", core.ReasonAllPendingPodsIsAlreadyAttempted, func(r *Record) {
				r.Event, r.Round = "RoundClosed", &c
			})
	}
	return nil
}

// PostFilter reports the member's own fit error (it is the round's culprit) and runs
// Koordinator's PostFilter (K coscheduling.go:172-174).
func (s *Shim) PostFilter(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, m fwktype.NodeToStatusReader) (*fwktype.PostFilterResult, *fwktype.Status) {
	gangID, groupID, group := s.gangOf(pod)
	if gangID != "" {
		state.Write(postFilterReached, reached{})
		fit := s.fitError(m)
		key := util.GetId(pod.Namespace, pod.Name)
		waiting := len(s.waitingOf(setOf(group)))
		nominated := s.nominatedNode(pod) // before this cycle's result may clear it
		s.mu.Lock()
		s.pre.Unmark(key) // DefaultPreemption did not nominate it in this cycle
		s.pre.Observe(key, nominated)
		rd := s.rounds[groupID]
		var rnum *int64
		var skipped int64
		if rd != nil {
			if rd.culprit == "" {
				rd.culprit, rd.fitErr = key, fit
			}
			c := rd.cycle
			rnum = &c
			skipped, rd.skipped = rd.skipped, 0
		}
		s.mu.Unlock()
		s.publish(pod, gangID, groupID, group, "Filter", "Unschedulable", dominantReason(fit), fit,
			func(r *Record) {
				r.Round, r.Culprit, r.FitError = rnum, strp(key), strp(fit)
				r.AlreadyWaitForBound = &waiting
				r.RoundsSkipped = skipped
			})
	}
	return s.Coscheduling.PostFilter(ctx, state, pod, m)
}

// postFilterReached is written into the cycle state by the shim's PostFilter: AfterPostFilter
// finds it missing when an earlier PostFilter plugin (DefaultPreemption) ended PostFilter.
const postFilterReached fwktype.StateKey = "gangstate.local/shim-postfilter-reached"

type reached struct{}

// Clone returns the mark itself (it carries nothing).
func (r reached) Clone() fwktype.StateData { return r }

// fitError writes the filter statuses the way kube-scheduler's FitError does ("0/N nodes are
// available: <count> <reason>, ..." with the reasons sorted as strings; kube-scheduler v1.35.2
// pkg/scheduler/framework/types.go:807-857).
func (s *Shim) fitError(m fwktype.NodeToStatusReader) string {
	nodes, err := s.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return ""
	}
	counts := map[string]int{}
	for _, ni := range nodes {
		st := m.Get(ni.Node().Name)
		if st == nil {
			continue
		}
		for _, r := range st.Reasons() {
			counts[r]++
		}
	}
	parts := make([]string, 0, len(counts))
	for r, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %v", n, r))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", len(nodes), strings.Join(parts, ", "))
}

// AfterPostFilter runs Koordinator's (K coscheduling.go:165-167: in Strict mode it rejects the
// group's waiting members, core/core.go:362-385), reports those releases, then applies the
// group's buffered commands: the point after every PostFilter plugin (frameworkext
// framework_extender.go:442-455), never inside PostFilter. When the shim's PostFilter was not
// reached in this cycle, DefaultPreemption nominated the pod: it counts as nominated for the
// commands decided now (docs/shim.md "Commands and preemption").
func (s *Shim) AfterPostFilter(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, m fwktype.NodeToStatusReader) {
	gangID, groupID, group := s.gangOf(pod)
	var before []*v1.Pod
	if gangID != "" {
		before = s.waitingOf(setOf(group))
	}
	s.Coscheduling.AfterPostFilter(ctx, state, pod, m)
	if gangID == "" {
		return
	}
	if _, err := state.Read(postFilterReached); err != nil && mayPreempt(pod) {
		// a PostFilter plugin before Coscheduling ended PostFilter: DefaultPreemption nominated
		// the pod (Success stops the PostFilter plugins, KS framework/runtime/framework.go:1103-1104);
		// its nominated node is written only after PostFilter returns. A pod whose preemption
		// policy is Never is never nominated (KS plugins/defaultpreemption/
		// default_preemption.go:318-319, PodEligibleToPreemptOthers), whatever ended its PostFilter
		s.mu.Lock()
		s.pre.Mark(util.GetId(pod.Namespace, pod.Name))
		s.mu.Unlock()
	}
	if len(before) > 0 {
		after := map[string]bool{}
		for _, w := range s.waitingOf(setOf(group)) {
			after[string(w.UID)] = true
		}
		key := util.GetId(pod.Namespace, pod.Name)
		s.mu.Lock()
		var fit string
		var rnum *int64
		if rd := s.rounds[groupID]; rd != nil {
			fit = rd.fitErr
			c := rd.cycle
			rnum = &c
		}
		s.mu.Unlock()
		n := len(before)
		for _, w := range before {
			if after[string(w.UID)] {
				continue
			}
			wg, wgr, wgroup := s.gangOf(w)
			s.publish(w, wg, wgr, wgroup, "PostFilter", "Rejected", "GangGroupRejected",
				fmt.Sprintf("GangGroup %q gets rejected due to member Pod %q is unschedulable, "+
					"alreadyWaitForBound: %d", groupID, key, n), func(r *Record) {
					r.Round, r.Culprit, r.FitError = rnum, strp(key), strp(fit)
					r.AlreadyWaitForBound = &n
				})
		}
	}
	s.applyPoint(groupID, group)
}

// Permit runs Koordinator's (K coscheduling.go:200-219) and reports Wait or the group allowed.
func (s *Shim) Permit(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, nodeName string) (*fwktype.Status, time.Duration) {
	st, wait := s.Coscheduling.Permit(ctx, state, pod, nodeName)
	gangID, groupID, group := s.gangOf(pod)
	if gangID == "" {
		return st, wait
	}
	status, event := "Success", "Allowed"
	switch {
	case st.Code() == fwktype.Wait:
		status, event = "Wait", ""
	case !st.IsSuccess():
		status, event = "Unschedulable", ""
	}
	s.mu.Lock()
	var rnum *int64
	if rd := s.rounds[groupID]; rd != nil {
		c := rd.cycle
		rnum = &c
		if status == "Success" {
			delete(s.rounds, groupID) // SucceedGangScheduling clears the context (K core/core.go:192-194)
		}
	}
	s.mu.Unlock()
	s.publishIf(status == "Success", pod, gangID, groupID, group, "Permit", status, "Coscheduling", st.Message(),
		func(r *Record) {
			r.Node, r.Round, r.Event = strp(nodeName), rnum, event
			if wait > 0 {
				r.Message = strings.TrimSpace(r.Message + fmt.Sprintf(" wait %s", wait))
			}
		})
	return st, wait
}

// Unreserve reports the release and runs Koordinator's (K coscheduling.go:229-231,
// core/core.go:456-475).
func (s *Shim) Unreserve(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, nodeName string) {
	s.Coscheduling.Unreserve(ctx, state, pod, nodeName)
	gangID, groupID, group := s.gangOf(pod)
	if gangID == "" {
		return
	}
	s.publish(pod, gangID, groupID, group, "Unreserve", "Rejected", "GangGroupRejected",
		fmt.Sprintf("Gang %q gets rejected due to Pod %q in Unreserve", gangID, pod.Name),
		func(r *Record) { r.Node = strp(nodeName) })
}

// PostBind runs Koordinator's (K coscheduling.go:281-283: the group becomes once satisfied,
// core/core.go:506-517) and reports the binding.
func (s *Shim) PostBind(ctx context.Context, state fwktype.CycleState, pod *v1.Pod, nodeName string) {
	s.Coscheduling.PostBind(ctx, state, pod, nodeName)
	gangID, groupID, group := s.gangOf(pod)
	if gangID == "" {
		return
	}
	s.publishIf(true, pod, gangID, groupID, group, "Bind", "Bound", "",
		fmt.Sprintf("Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, nodeName),
		func(r *Record) { r.Node = strp(nodeName) })
	s.noteRepresentative(pod, gangID, groupID, group, "pod bound")
}

// sampleRound records a round opened at cycle by first and decides whether it is reported in
// detail. koord-scheduler v1.8.0 retries a gang that cannot fit as fast as its queue allows
// (hundreds of rounds per second on the local control plane: the failed members go through the
// backoff queue, K core/core.go:150-190, and every round repeats the last); reporting each
// would flood gang-events. So at most one round per gang group and interval is reported with
// all its records; the rounds in between are counted, and the next detailed round's first
// failure (or release) carries that count as rounds_skipped; a group is quiet only while its
// rounds keep coming (a round opened within two intervals), so the PreEnqueue outcomes of a
// gang that stopped being retried are reported again. Permit Success and Bound are always
// reported.
func (s *Shim) sampleRound(groupID string, cycle int64, first string) *round {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := time.Now()
	s.lastOpened[groupID] = t
	rd := &round{cycle: cycle, first: first}
	if last, ok := s.lastRound[groupID]; !ok || t.Sub(last) >= s.interval {
		rd.skipped = s.skipped[groupID]
		s.lastRound[groupID] = t
		s.skipped[groupID] = 0
		s.quiet[groupID] = false
	} else {
		s.skipped[groupID]++
		s.quiet[groupID] = true
		bus.RoundsSampledOut.Inc()
	}
	s.rounds[groupID] = rd
	return rd
}

// dominantReason is the most frequent reason of a fit error written by fitError ("2
// Insufficient nvidia.com/gpu" -> "Insufficient nvidia.com/gpu"); FailedScheduling when none.
func dominantReason(fit string) string {
	_, list, ok := strings.Cut(fit, "available: ")
	if !ok {
		return "FailedScheduling"
	}
	best, bestN := "FailedScheduling", 0
	for _, part := range strings.Split(strings.TrimSuffix(list, "."), ", ") {
		var n int
		var r string
		if c, err := fmt.Sscanf(part, "%d", &n); err == nil && c == 1 {
			r = strings.TrimSpace(strings.TrimPrefix(part, fmt.Sprint(n)))
			if n > bestN {
				best, bestN = r, n
			}
		}
	}
	return best
}

// mayPreempt is false for a pod with preemptionPolicy Never: DefaultPreemption never nominates
// it (kube-scheduler v1.35.2 default_preemption.go:318-319, PodEligibleToPreemptOthers).
func mayPreempt(pod *v1.Pod) bool {
	return pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != v1.PreemptNever
}
