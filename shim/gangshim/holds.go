package gangshim

// The shell of gangstate's holds (docs/shim.md "Holding a gang that cannot fit"): HoldGang and
// ReleaseGang decided at once when they arrive (fencing.State.DecideHold), the held groups kept
// by the pure tracker fencing.Holds, a held group's pods refused at PreEnqueue and
// BeforePreFilter, and the group's pending members activated when its hold ends (by command,
// ttl lapse or silence): Koordinator v1.8.0 registers no cluster events for Coscheduling
// (K coscheduling.go:109-112), so a pod refused at PreEnqueue would otherwise wait in the
// unschedulable pods for up to 5 minutes (kube-scheduler's podMaxInUnschedulablePodsDuration).

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwktype "k8s.io/kube-scheduler/framework"

	"gangstate.local/shim/bus"
	"gangstate.local/shim/fencing"
)

// HoldAnnotation on a Namespace with an off value ("off", "false", any case; the values of
// gangstate's own check, streams/core/rules/holding.py HOLD_OFF_VALUES) makes the shim refuse
// every HoldGang of a gang group with a gang in that namespace.
const HoldAnnotation = "gangstate.io/hold"

// Causes of a hold's end (gangstate_shim_holds_released_total{cause}).
const (
	causeCommand = "command"
	causeTTL     = "ttl"
	causeSilence = "silence"
	causeEvicted = "evicted"
)

// heldInCycle is written into the cycle state by BeforePreFilter when it refuses a held pod, so
// that PostFilter reports no fit error for it (the refusal is the hold's, not the cluster's).
const heldInCycle fwktype.StateKey = "gangstate.local/shim-held"

// heldStatus is the refusal of a pod of a held group: UnschedulableAndUnresolvable, message
// "gangstate holds gang group <group>: <message>".
func heldStatus(group, message string) *fwktype.Status {
	return fwktype.NewStatus(fwktype.UnschedulableAndUnresolvable,
		"gangstate holds gang group "+group+": "+message)
}

// heldRefusal is the refusal status of m's pod when its gang group is held now (nil when the
// pod is no gang member or its group is not held), counted under hook.
func (s *Shim) heldRefusal(m member, hook string) *fwktype.Status {
	if !m.isGang() {
		return nil
	}
	s.mu.Lock()
	msg, held := s.holds.Held(m.group, s.now())
	s.mu.Unlock()
	if !held {
		return nil
	}
	bus.HoldRefusals.WithLabelValues(hook).Inc()
	return heldStatus(m.group, msg)
}

// decideHold answers a HoldGang, ReleaseGang or ActivateGang at once (not buffered to an apply
// point): the fence, the off switches (the shim's GANGSTATE_SHIM_HOLDS, the namespaces' annotation) and the
// group's nominated members (nominatedLocked) as fencing.State.DecideHold takes them; an Applied
// HoldGang holds the group from now for its ttl_seconds, an Applied ReleaseGang ends the hold
// and activates the group's pending members, an Applied ActivateGang activates them
// (activateGroup). The ack is published keyed by the gang group
// (within the cluster: bus.Config.Key) and
// the command's offset committed once it is delivered.
func (s *Shim) decideHold(c fencing.Command, commit func()) {
	gangs := splitGroup(c.GangGroup)
	checks := fencing.HoldChecks{ShimOff: !s.cfg.Holds, NamespacesOff: s.namespacesOff(gangs)}
	current := s.representative(gangs)
	_, pods := s.pending(gangs)
	s.mu.Lock()
	nominated := s.preemptingLocked(pods)
	outcome, rep, reason := s.state.DecideHold(c, current, nominated, checks)
	released, activate := false, false
	if outcome == fencing.Applied {
		now := s.now()
		switch c.Type {
		case fencing.HoldGang:
			s.holds.Hold(c.GangGroup, c.Message, now, secondsOf(*c.TTLSeconds), c.Epoch, c.ID)
		case fencing.ActivateGang:
			activate = true
		default:
			released = s.holds.Release(c.GangGroup)
		}
	}
	bus.Holds.Set(float64(s.holds.Len()))
	s.mu.Unlock()
	d := fencing.Decision{Command: c, Outcome: outcome, Representative: rep, Reason: reason}
	bus.Commands.WithLabelValues(outcome).Inc()
	klog.InfoS("gangstate shim: command answered", "command", c.ID, "type", c.Type,
		"outcome", outcome, "reason", reason, "representative", rep, "nominated", nominated)
	s.pub.Publish(s.cfg.Key(c.GangGroup), fencing.AckSchema, fencing.MakeAck(d, s.stamp(), s.cfg.ShimID),
		func(err error) {
			if err == nil {
				commit()
			}
		})
	if released {
		s.released([]string{c.GangGroup}, causeCommand)
	}
	if activate {
		s.activateGroup(c.GangGroup, "gangstate shim: gang group activated")
	}
}

// activateGroup moves the group's pending members to the active queue (Handle.Activate), where
// PreEnqueue runs again, and logs what (with keysAndValues): an applied ActivateGang (rules
// PR7, ST5: a member Coscheduling rejected or refused waits in the unschedulable pods, which
// no cluster event moves for Coscheduling, K coscheduling.go:109-112) or a hold's end
// (released). A held group's members are refused again at PreEnqueue. Never called under the
// scheduling queue's lock (the command consumer, the sweep).
func (s *Shim) activateGroup(group, what string, keysAndValues ...any) {
	_, pods := s.pending(splitGroup(group))
	klog.InfoS(what, append([]any{"gangGroup", group}, append(keysAndValues,
		"activated", len(pods))...)...)
	if len(pods) > 0 {
		s.handle.Activate(klog.Background(), pods)
	}
}

// sweepHolds ends the holds whose ttl lapsed (fencing.Holds.Expired) and, when no command was
// heard for GANGSTATE_SHIM_HOLD_SILENCE, every hold (fencing.Holds.Silent); the groups' pending
// members are activated. Called by the sweep every second, without s.mu.
func (s *Shim) sweepHolds() {
	s.mu.Lock()
	now := s.now()
	cause, groups := causeTTL, []string(nil)
	if s.holds.Silent(now, s.cfg.HoldSilence) {
		cause, groups = causeSilence, s.holds.DropAll()
	} else {
		groups = s.holds.Expired(now)
	}
	bus.Holds.Set(float64(s.holds.Len()))
	s.mu.Unlock()
	s.released(groups, cause)
}

// released counts the groups' holds ended by cause and activates their pending members
// (Handle.Activate: kube-scheduler moves them to activeQ, where PreEnqueue runs again). Never
// called under the scheduling queue's lock (the command consumer, the sweep).
func (s *Shim) released(groups []string, cause string) {
	for _, g := range groups {
		bus.HoldsReleased.WithLabelValues(cause).Inc()
		s.activateGroup(g, "gangstate shim: hold ended", "cause", cause)
	}
}

// namespacesOff maps each namespace of the gang ids (ns/name) whose Namespace, as the
// scheduler's namespace informer holds it, carries HoldAnnotation with an off value to that
// value (nil when none; a Namespace not found counts as not annotated).
func (s *Shim) namespacesOff(gangs []string) map[string]string {
	var out map[string]string
	for _, g := range gangs {
		ns, _, _ := strings.Cut(g, "/")
		if _, seen := out[ns]; seen || s.namespaces == nil {
			continue
		}
		obj, err := s.namespaces.Get(ns)
		if err != nil {
			continue
		}
		if v := strings.TrimSpace(obj.Annotations[HoldAnnotation]); isOff(v) {
			if out == nil {
				out = map[string]string{}
			}
			out[ns] = v
		}
	}
	return out
}

func isOff(v string) bool {
	v = strings.ToLower(v)
	return v == "off" || v == "false"
}

// forgetHoldsLocked drops the holds of gang groups gone from the gang cache (nothing to
// activate: no member is left in the cache). Called with s.mu held.
func (s *Shim) forgetHoldsLocked(gone []string) {
	for _, g := range gone {
		if s.holds.Drop(g) {
			bus.HoldsReleased.WithLabelValues(causeEvicted).Inc()
			klog.InfoS("gangstate shim: hold ended", "gangGroup", g, "cause", causeEvicted)
		}
	}
	bus.Holds.Set(float64(s.holds.Len()))
}

// reportHeld publishes the refusal of a held pod at stage (PreEnqueue or PreFilter): status
// UnschedulableAndUnresolvable, reason GangHeld, the refusal's message and framework code.
func (s *Shim) reportHeld(m member, stage string, st *fwktype.Status) {
	s.publish(false, m, stage, "UnschedulableAndUnresolvable", "GangHeld", st.Message(),
		func(r *Record) { r.Code = st.Code().String() })
}

// secondsOf is n seconds as a duration.
func secondsOf(n int64) time.Duration { return time.Duration(n) * time.Second }

// preemptingLocked lists the group's pending members whose preemption is under way, for a
// HoldGang: nominated (nominatedLocked) to a node that still has victims terminating by the
// scheduler's preemption. Neither a nominated node alone nor a nomination by this cycle's
// PostFilter (fencing.Unpublished) counts: kube-scheduler v1.35.2 leaves
// status.nominatedNodeName on a gang's members that waited at Permit in a round that failed,
// and the mark is set on every cycle whose DefaultPreemption ran before Coscheduling's (both
// seen on the local control plane for a 3 x 1 GPU gang on 2 GPUs while each retry said "No
// preemption victims found"), and such a gang is exactly the one to hold; gangstate itself
// holds no gang whose preemption it sees under way (rule H1). Called with s.mu held.
func (s *Shim) preemptingLocked(pods map[string]*v1.Pod) map[string]string {
	out := map[string]string{}
	for member, node := range s.nominatedLocked(pods) {
		if node != fencing.Unpublished && s.victimsTerminating(node, pods[member]) {
			out[member] = node
		}
	}
	return out
}
