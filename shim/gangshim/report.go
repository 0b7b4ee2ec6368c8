package gangshim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	fwktype "k8s.io/kube-scheduler/framework"

	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling/core"

	"gangstate.local/shim/bus"
)

// Record is a gangstate.cycle/v1 record as the shim writes it (contracts.md): the optional
// fields shim (the shim's id, on every record it writes), round, rounds_skipped, event and code
// are the shim's; cluster is GANGSTATE_CLUSTER outside the default cluster (omitted in it).
// Gang, gang group and pods are named as the scheduler's own cluster names them.
type Record struct {
	Schema              string  `json:"schema"`
	ObservedAt          string  `json:"observed_at"`
	Scheduler           string  `json:"scheduler"`
	Shim                string  `json:"shim"`
	Cluster             string  `json:"cluster,omitempty"`
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

// CycleSchema is the schema id of the records above.
const CycleSchema = "gangstate.cycle/v1"

// stamp is the shim's clock as observed_at writes it (UTC, microseconds).
func (s *Shim) stamp() string { return s.now().UTC().Format("2006-01-02T15:04:05.000000Z") }

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// roundOf is the cycle number of group's open round (nil when none) and the round itself.
func (s *Shim) roundOf(group string) (*int64, Round) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rd := s.rounds.Of(group); rd != nil {
		c := rd.Cycle
		return &c, *rd
	}
	return nil, Round{}
}

// publish sends one record about pod, a member of m's gang group, unless the group's current
// round is sampled out (Rounds.Quiet; always: publish anyway), keyed by the gang id within the
// cluster (bus.Config.Key: eu-1:ns/g outside default). It never blocks (bus.Publisher).
func (s *Shim) publish(always bool, m member, stage, status, reason, message string,
	fill func(*Record)) {
	if !always {
		s.mu.Lock()
		q := s.rounds.Quiet(m.group)
		s.mu.Unlock()
		if q {
			bus.SampledOut.Inc()
			return
		}
	}
	pod := m.pod
	rec := &Record{Schema: CycleSchema, ObservedAt: s.stamp(), Scheduler: SchedulerName,
		Shim: s.cfg.ShimID, Cluster: s.cfg.WireCluster(), Cycle: s.cycle(), Pod: PodRef{pod.Namespace, pod.Name, string(pod.UID)},
		Gang: m.gang, GangGroup: m.group, Stage: stage, Status: status, Reason: reason,
		Message: message, Representative: strp(s.representative(m.gangs))}
	if fill != nil {
		fill(rec)
	}
	s.pub.Publish(s.cfg.Key(m.gang), CycleSchema, rec, nil)
}

// noteRepresentative publishes a record when the group's representative changed since the last
// one published (event RepresentativeRecorded or RepresentativeCleared).
func (s *Shim) noteRepresentative(m member, why string) {
	rep := s.representative(m.gangs)
	s.mu.Lock()
	old, known := s.reps[m.group]
	s.reps[m.group] = rep
	s.mu.Unlock()
	if known && old == rep || !known && rep == "" {
		return
	}
	event := "RepresentativeRecorded"
	if rep == "" {
		event = "RepresentativeCleared"
	}
	s.publish(false, m, "PreEnqueue", "Success", event,
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

// -- what each hook reports ----------------------------------------------------------------------

// preEnqueued reports a PreEnqueue outcome: status Gated-like UnschedulableAndUnresolvable for
// a refusal, the framework code in "code", Koordinator's message; and the representative
// recorded or cleared (K core/gang.go:572-586, core/ganggroup.go:144-167).
func (s *Shim) preEnqueued(m member, st *fwktype.Status) {
	if !m.isGang() {
		return
	}
	status, reason, msg := "Success", "", ""
	if !st.IsSuccess() {
		msg = st.Message()
		status, reason = "UnschedulableAndUnresolvable", preEnqueueReason(msg)
	}
	s.publish(false, m, "PreEnqueue", status, reason, msg,
		func(r *Record) { r.Code = st.Code().String() })
	s.noteRepresentative(m, "PreEnqueue")
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

// beforePreFiltered reports BeforePreFilter: a round opened when the representative (wasRep)
// passed and Koordinator cleared it (K core/core.go:318-334), or a refusal of a later member
// with the round's cached failure (core/core.go:336-339).
func (s *Shim) beforePreFiltered(m member, wasRep bool, st *fwktype.Status) {
	if !m.isGang() {
		return
	}
	cycle := s.cycle()
	if st.IsSuccess() {
		if wasRep && s.representative(m.gangs) == "" {
			s.mu.Lock()
			rd, detailed := s.rounds.Open(m.group, cycle, m.key)
			if !detailed {
				bus.RoundsSampledOut.Inc()
			}
			s.mu.Unlock()
			s.publish(false, m, "PreFilter", "Success", "RoundOpened",
				"gang scheduling context opened by the representative", func(r *Record) {
					r.Event, r.Round, r.RoundsSkipped = "RoundOpened", &cycle, rd.Skipped
				})
			s.noteRepresentative(m, "gang group enters scheduling")
		}
		return
	}
	rnum, rd := s.roundOf(m.group)
	s.publish(false, m, "PreFilter", "UnschedulableAndUnresolvable", "GangGroupRejected",
		st.Message(), func(r *Record) {
			r.Round = rnum
			r.Culprit, r.FitError = strp(rd.Culprit), strp(rd.FitErr)
			r.Code = st.Code().String()
		})
}

// opened is the open round as NextPod found it: the round and its group's pods waiting at
// Permit then.
type opened struct {
	round   Round
	waiting []*v1.Pod
}

// openRound is the open round and its waiting members (nil when no round is open).
func (s *Shim) openRound() *opened {
	s.mu.Lock()
	rd := s.rounds.Current()
	var o *opened
	if rd != nil {
		o = &opened{round: *rd}
	}
	s.mu.Unlock()
	if o != nil {
		o.waiting = s.waitingOf(splitGroup(o.round.Group))
	}
	return o
}

// nextPodDone reports what NextPod did with the open round o: a member handed out (pod), or,
// with nothing left, the round closed and its waiting members rejected with "all pending pods
// is already been attempted" (K core/core.go:186-187); without waiting members the round's
// first member carries the close.
func (s *Shim) nextPodDone(o *opened, pod *v1.Pod) {
	if o == nil {
		return
	}
	c := o.round.Cycle
	if pod != nil {
		s.publish(false, s.memberOf(pod), "PreFilter", "Success", "MemberHandedOut",
			"NextPod hands out a pending member of the round", func(r *Record) {
				r.Event, r.Round = "MemberHandedOut", &c
			})
		return
	}
	skipped := int64(0)
	s.mu.Lock()
	if cur := s.rounds.Of(o.round.Group); cur != nil {
		skipped = s.rounds.Close().Skipped
	}
	s.mu.Unlock()
	for _, w := range o.waiting {
		n := skipped
		skipped = 0
		s.publish(false, s.memberOf(w), "Permit", "Rejected", "GangRoundEnded",
			core.ReasonAllPendingPodsIsAlreadyAttempted, func(r *Record) {
				r.Event, r.Round, r.RoundsSkipped = "RoundClosed", &c, n
			})
	}
	if len(o.waiting) == 0 && o.round.First != "" {
		gangs := splitGroup(o.round.Group)
		first := member{pod: podOfKey(o.round.First), key: o.round.First, gang: gangs[0],
			group: o.round.Group, gangs: gangs}
		s.publish(false, first, "PreFilter", "Success", "RoundClosed",
			core.ReasonAllPendingPodsIsAlreadyAttempted, func(r *Record) {
				r.Event, r.Round = "RoundClosed", &c
			})
	}
}

// postFilterReached is written into the cycle state by the shim's PostFilter: AfterPostFilter
// finds it missing when an earlier PostFilter plugin (DefaultPreemption) ended PostFilter.
const postFilterReached fwktype.StateKey = "gangstate.local/shim-postfilter-reached"

type reached struct{}

// Clone returns the mark itself (it carries nothing).
func (r reached) Clone() fwktype.StateData { return r }

// postFiltering reports the member's own fit error, the round's culprit when it is the first,
// with the group's members waiting at Permit (Koordinator's alreadyWaitForBound,
// K core/core.go:376-381), and notes whether the member is nominated (fencing.Preemptions).
func (s *Shim) postFiltering(m member, state fwktype.CycleState, statuses fwktype.NodeToStatusReader) {
	if !m.isGang() {
		return
	}
	state.Write(postFilterReached, reached{})
	fit := s.fitError(statuses)
	waiting := len(s.waitingOf(m.gangs))
	nominated := s.nominatedNode(m.pod) // before this cycle's result may clear it
	s.mu.Lock()
	s.pre.Unmark(m.key) // DefaultPreemption did not nominate it in this cycle
	s.pre.Observe(m.key, nominated)
	var rnum *int64
	rd, skipped := s.rounds.Failed(m.group, m.key, fit)
	if rd != nil {
		c := rd.Cycle
		rnum = &c
	}
	s.mu.Unlock()
	s.publish(false, m, "Filter", "Unschedulable", dominantReason(fit), fit, func(r *Record) {
		r.Round, r.Culprit, r.FitError = rnum, strp(m.key), strp(fit)
		r.AlreadyWaitForBound = &waiting
		r.RoundsSkipped = skipped
	})
}

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

// afterPostFiltered reports the members Koordinator's AfterPostFilter released (waiting before,
// not after), and, when the shim's PostFilter was not reached in this cycle, marks the pod as
// nominated by DefaultPreemption for the commands decided now (docs/shim.md "Commands and
// preemption").
func (s *Shim) afterPostFiltered(m member, state fwktype.CycleState, before []*v1.Pod) {
	if !m.isGang() {
		return
	}
	if _, err := state.Read(postFilterReached); err != nil && mayPreempt(m.pod) {
		// a PostFilter plugin before Coscheduling ended PostFilter: DefaultPreemption nominated
		// the pod (Success stops the PostFilter plugins, KS framework/runtime/framework.go:1103-1104);
		// its nominated node is written only after PostFilter returns. A pod whose preemption
		// policy is Never is never nominated (KS plugins/defaultpreemption/
		// default_preemption.go:318-319, PodEligibleToPreemptOthers), whatever ended its PostFilter
		s.mu.Lock()
		s.pre.Mark(m.key)
		s.mu.Unlock()
	}
	if len(before) == 0 {
		return
	}
	after := map[string]bool{}
	for _, w := range s.waitingOf(m.gangs) {
		after[string(w.UID)] = true
	}
	rnum, rd := s.roundOf(m.group)
	n := len(before)
	for _, w := range before {
		if after[string(w.UID)] {
			continue
		}
		s.publish(false, s.memberOf(w), "PostFilter", "Rejected", "GangGroupRejected",
			fmt.Sprintf("GangGroup %q gets rejected due to member Pod %q is unschedulable, "+
				"alreadyWaitForBound: %d", m.group, m.key, n), func(r *Record) {
				r.Round, r.Culprit, r.FitError = rnum, strp(m.key), strp(rd.FitErr)
				r.AlreadyWaitForBound = &n
			})
	}
}

// mayPreempt is false for a pod with preemptionPolicy Never: DefaultPreemption never nominates
// it (kube-scheduler v1.35.2 default_preemption.go:318-319, PodEligibleToPreemptOthers).
func mayPreempt(pod *v1.Pod) bool {
	return pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != v1.PreemptNever
}

// permitted reports Permit: Wait, Unschedulable, or the group allowed (Success, always
// published), which closes the open round (SucceedGangScheduling clears the context,
// K core/core.go:192-194).
func (s *Shim) permitted(m member, nodeName string, st *fwktype.Status, wait time.Duration) {
	if !m.isGang() {
		return
	}
	status, event := "Success", "Allowed"
	switch {
	case st.Code() == fwktype.Wait:
		status, event = "Wait", ""
	case !st.IsSuccess():
		status, event = "Unschedulable", ""
	}
	var rnum *int64
	s.mu.Lock()
	if rd := s.rounds.Of(m.group); rd != nil {
		c := rd.Cycle
		rnum = &c
		if status == "Success" {
			s.rounds.Close()
		}
	}
	s.mu.Unlock()
	s.publish(status == "Success", m, "Permit", status, "Coscheduling", st.Message(),
		func(r *Record) {
			r.Node, r.Round, r.Event = strp(nodeName), rnum, event
			if wait > 0 {
				r.Message = strings.TrimSpace(r.Message + fmt.Sprintf(" wait %s", wait))
			}
		})
}

// unreserved reports the member's release (K core/core.go:456-475).
func (s *Shim) unreserved(m member, nodeName string) {
	if !m.isGang() {
		return
	}
	s.publish(false, m, "Unreserve", "Rejected", "GangGroupRejected",
		fmt.Sprintf("Gang %q gets rejected due to Pod %q in Unreserve", m.gang, m.pod.Name),
		func(r *Record) { r.Node = strp(nodeName) })
}

// bound reports the binding (always published) and the representative it may have cleared.
func (s *Shim) bound(m member, nodeName string) {
	if !m.isGang() {
		return
	}
	s.publish(true, m, "Bind", "Bound", "",
		fmt.Sprintf("Successfully assigned %s/%s to %s", m.pod.Namespace, m.pod.Name, nodeName),
		func(r *Record) { r.Node = strp(nodeName) })
	s.noteRepresentative(m, "pod bound")
}
