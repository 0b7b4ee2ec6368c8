package gangshim

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/coscheduling/util"

	"gangstate.local/shim/bus"
	"gangstate.local/shim/fencing"
)

// OtherCluster is the outcome label of a command of another cluster, skipped
// (gangstate_shim_commands_total).
const OtherCluster = "other_cluster"

// commandLoop recovers the fences from this shim's own acks on gang-events (fencing.Recover),
// then consumes the commands topic for as long as the process lives. Until the fences are
// recovered no command is decided.
func (s *Shim) commandLoop() {
	ctx := context.Background()
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		acks, err := bus.ReadAcks(rctx, s.cfg)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.state = fencing.Recover(acks, s.cfg.ShimID, s.cfg.Cluster)
			s.ready = true
			s.mu.Unlock()
			klog.InfoS("gangstate shim: fences recovered", "acks", len(acks),
				"groups", len(s.state.Fences))
			break
		}
		klog.ErrorS(err, "gangstate shim: reading acks back; retrying")
		time.Sleep(2 * time.Second)
	}
	go s.sweep()
	for {
		err := bus.ConsumeCommands(ctx, s.cfg, s.onCommand)
		klog.ErrorS(err, "gangstate shim: consuming commands stopped; restarting")
		time.Sleep(2 * time.Second)
	}
}

// onCommand buffers one command until its group's next apply point, or decides a HoldGang,
// ReleaseGang or ActivateGang at once (decideHold: a hold has no apply point, it refuses the
// group's pods from now on; an activation moves the group's pending members now). A command of another cluster (its "cluster", absent = default, is not this shim's
// GANGSTATE_CLUSTER) is skipped first: counted (gangstate_shim_commands_total{outcome=
// "other_cluster"}), its offset committed, never acked, never buffered or decided, not heard;
// nothing of the fences or the holds is touched (its gang group is named as its own cluster
// names it and may match one of this cluster's). Every valid command of this cluster counts as
// heard (fencing.Holds.Heard: gangstate still speaks). A
// command whose id was answered before (in this process or, through the recovered acks, before
// a restart) is not acked again: its offset is committed at once. A hold command that arrives
// before the fences are recovered is left uncommitted (redelivered, decided then); so is an
// ActivateGang.
func (s *Shim) onCommand(value []byte, commit func()) {
	var c fencing.Command
	if err := json.Unmarshal(value, &c); err != nil || c.Schema != "gangstate.command/v1" ||
		c.ID == "" || c.GangGroup == "" || c.Epoch < 1 {
		klog.InfoS("gangstate shim: skipping an invalid command", "err", err)
		commit()
		return
	}
	if fencing.ClusterOf(c.Cluster) != fencing.ClusterOf(s.cfg.Cluster) {
		bus.Commands.WithLabelValues(OtherCluster).Inc()
		klog.V(5).InfoS("gangstate shim: skipping a command of another cluster",
			"command", c.ID, "cluster", fencing.ClusterOf(c.Cluster))
		commit()
		return
	}
	s.mu.Lock()
	s.holds.Heard(s.now())
	if fencing.DecidedAtOnce(c.Type) {
		answered, ready := s.state.Answered[c.ID], s.ready
		s.mu.Unlock()
		switch {
		case answered:
			bus.Commands.WithLabelValues("duplicate").Inc()
			commit()
		case !ready:
			klog.InfoS("gangstate shim: a command decided at once before the fences are "+
				"recovered; left for redelivery", "command", c.ID, "type", c.Type)
		default:
			s.decideHold(c, commit)
		}
		return
	}
	defer s.mu.Unlock()
	if !s.state.Buffer(c) {
		bus.Commands.WithLabelValues("duplicate").Inc()
		if s.state.Answered[c.ID] {
			commit()
		} else {
			s.commit[c.ID] = append(s.commit[c.ID], commit)
		}
		return
	}
	s.commit[c.ID] = append(s.commit[c.ID], commit)
}

// sweep runs every second over the groups with buffered commands (sweepOnce) and the holds.
func (s *Shim) sweep() {
	for range time.Tick(time.Second) {
		s.sweepOnce()
	}
}

// sweepOnce decides or wakes the groups with buffered commands. A group with no pending member
// left (scheduled or deleted) gets no apply point any more: its commands are decided now (with
// no candidate the compare-and-swap fails: PreconditionFailed), since every command must be
// acked. A group with pending members may sit in the unschedulable pods for good (a pod refused
// at PreEnqueue by Coscheduling is moved by no cluster event: K coscheduling.go:109-112;
// docs/contracts.md "Scheduling gates"), so its next PreEnqueue is brought about with the
// framework's own means: the pending pod each command names is activated once
// (Handle.Activate), which runs its PreEnqueue, the apply point. The memory of activated
// commands keeps only the commands still buffered.
//
// Then the holds whose ttl lapsed, or all of them after a silence, end (sweepHolds).
func (s *Shim) sweepOnce() {
	defer s.sweepHolds()
	s.mu.Lock()
	groups := s.state.Groups()
	targets := map[string][]string{}
	for _, g := range groups {
		for _, c := range s.state.Pending[g] {
			if !s.activated[c.ID] {
				s.activated[c.ID] = true
				targets[g] = append(targets[g], c.Representative)
			}
		}
	}
	s.pruneActivated()
	s.mu.Unlock()
	for _, g := range groups {
		group := splitGroup(g)
		keys, pods := s.pending(group)
		if len(keys) == 0 {
			s.applyPoint(g, group)
			continue
		}
		wake := map[string]*v1.Pod{}
		for _, t := range targets[g] {
			if p := pods[t]; p != nil {
				wake[t] = p
			}
		}
		if len(wake) == 0 && len(targets[g]) > 0 {
			wake[keys[0]] = pods[keys[0]] // the target is not pending: any member's PreEnqueue decides
		}
		if len(wake) > 0 {
			s.handle.Activate(klog.Background(), wake)
		}
	}
}

// pruneActivated drops the activated commands no longer buffered (decided). Called with s.mu held.
func (s *Shim) pruneActivated() {
	buffered := map[string]bool{}
	for _, cs := range s.state.Pending {
		for _, c := range cs {
			buffered[c.ID] = true
		}
	}
	for id := range s.activated {
		if !buffered[id] {
			delete(s.activated, id)
		}
	}
}

// applyAt is an apply point of m's gang group (nothing for a pod that is no gang member).
func (s *Shim) applyAt(m member) {
	if m.isGang() {
		s.applyPoint(m.group, m.gangs)
	}
}

// applyPoint decides the group's buffered commands (fencing.State.ApplyPending) against the
// representative in Koordinator's gang cache and the group's pending members, makes an Applied
// representative current with the gang cache's own methods (GangGroupInfo.DeleteIfRepresentative
// and RecordIfNoRepresentatives, K core/ganggroup.go:144-167), activates the new representative
// through the framework (Handle.Activate: kube-scheduler moves it to activeQ, where PreEnqueue
// lets it pass), and acks every command on gang-events keyed by the gang group id (within the
// cluster: bus.Config.Key). The offset
// of a command is committed once its ack is delivered.
func (s *Shim) applyPoint(groupID string, group []string) {
	s.mu.Lock()
	if !s.ready || len(s.state.Pending[groupID]) == 0 {
		s.mu.Unlock()
		return
	}
	current := s.representative(group)
	candidates, pods := s.pending(group)
	nominated := s.nominatedLocked(pods)
	rep, decisions := s.state.ApplyPending(groupID, current, candidates, nominated)
	commits := map[string][]func(){}
	for _, d := range decisions {
		commits[d.Command.ID] = s.commit[d.Command.ID]
		delete(s.commit, d.Command.ID)
	}
	s.mu.Unlock()
	if rep != current && rep != "" {
		if target := pods[rep]; target != nil {
			s.switchTo(current, target)
		}
	}
	at := s.stamp()
	for _, d := range decisions {
		bus.Commands.WithLabelValues(d.Outcome).Inc()
		ack := fencing.MakeAck(d, at, s.cfg.ShimID)
		done := commits[d.Command.ID]
		klog.InfoS("gangstate shim: command answered", "command", d.Command.ID,
			"outcome", d.Outcome, "representative", d.Representative, "was", current,
			"reason", d.Reason, "nominated", nominated)
		s.pub.Publish(s.cfg.Key(groupID), fencing.AckSchema, ack, func(err error) {
			if err != nil {
				return // not committed: redelivered after a restart, decided then
			}
			for _, c := range done {
				c()
			}
		})
	}
}

// nominatedLocked lists the group's pending members in a preemption (ns/name -> node), for
// fencing's preemption rule (docs/shim.md "Commands and preemption"; the memory and the rule of
// who counts is fencing.Preemptions): each pod's status.nominatedNodeName as the scheduler's
// pod informer holds it, and whether a node still has victims terminating, from the same
// informer. Called with s.mu held.
func (s *Shim) nominatedLocked(pods map[string]*v1.Pod) map[string]string {
	pending := make(map[string]string, len(pods))
	for key, p := range pods {
		pending[key] = s.nominatedNode(p)
	}
	var gone []string
	for _, known := range []map[string]string{s.pre.Last, markedNodes(s.pre.Marked)} {
		for key := range known {
			if _, ok := pods[key]; !ok && s.notPending(key) {
				gone = append(gone, key)
			}
		}
	}
	s.pre.Forget(gone)
	return s.pre.Members(pending, func(node, member string) bool {
		return s.victimsTerminating(node, pods[member])
	})
}

func markedNodes(m map[string]bool) map[string]string {
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}

// notPending tells whether pod key (ns/name) is gone from the scheduler's pod informer or bound.
func (s *Shim) notPending(key string) bool {
	ns, name, _ := strings.Cut(key, "/")
	p, err := s.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(ns).Get(name)
	return err != nil || p.Spec.NodeName != "" || p.DeletionTimestamp != nil
}

// nominatedNode is pod's status.nominatedNodeName as the scheduler's pod informer has it (the
// given object's when the informer has no such pod).
func (s *Shim) nominatedNode(p *v1.Pod) string {
	lister := s.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	if live, err := lister.Pods(p.Namespace).Get(p.Name); err == nil && live.UID == p.UID {
		return live.Status.NominatedNodeName
	}
	return p.Status.NominatedNodeName
}

// victimsTerminating tells whether node still has a pod of lower priority than preemptor
// terminating by the scheduler's preemption (kube-scheduler's own test for "not eligible due to
// a terminating pod on the nominated node", KS default_preemption.go:331-337,354-366).
func (s *Shim) victimsTerminating(node string, preemptor *v1.Pod) bool {
	all, err := s.handle.SharedInformerFactory().Core().V1().Pods().Lister().List(labels.Everything())
	if err != nil {
		return false
	}
	for _, p := range all {
		if p.Spec.NodeName != node || p.DeletionTimestamp == nil ||
			corev1helpers.PodPriority(p) >= corev1helpers.PodPriority(preemptor) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue &&
				c.Reason == v1.PodReasonPreemptionByScheduler {
				return true
			}
		}
	}
	return false
}

// switchTo makes target the group's representative in Koordinator's gang cache and activates it.
func (s *Shim) switchTo(current string, target *v1.Pod) {
	gangID := util.GetId(target.Namespace, util.GetGangNameByPod(target))
	sum, ok := s.mgr.GetGangSummary(gangID)
	if !ok || sum == nil || sum.GangGroupInfo == nil {
		return
	}
	gg := sum.GangGroupInfo
	if current != "" {
		gg.DeleteIfRepresentative(podOfKey(current), "gangstate command")
	}
	gg.RecordIfNoRepresentatives(target)
	key := util.GetId(target.Namespace, target.Name)
	// PreEnqueue runs under the scheduling queue's lock: activate from another goroutine
	go s.handle.Activate(klog.Background(), map[string]*v1.Pod{key: target})
}
