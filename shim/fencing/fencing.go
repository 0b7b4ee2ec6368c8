// Package fencing is the scheduler shim's fencing core: which gangstate commands to apply and
// the acks that answer them, after docs/contracts.md "gangstate.command/v1" and
// "gangstate.ack/v1".
//
// Commands and preemption (docs/shim.md "Commands and preemption"): while a member of the
// group has a nominated node (kube-scheduler's DefaultPreemption evicted victims for it and it
// waits for them in the queue), only a nominated member may become the representative; a
// command naming any other pod is refused (PreconditionFailed, reason "preemption in
// progress: ..."), since Koordinator would refuse the nominated member at PreEnqueue and its
// victims would have been evicted in vain.
//
// Rule: a command is applied only if its epoch is greater than its gang group's fence and its
// expected representative still holds (compare-and-swap); every command is answered Applied,
// Stale or PreconditionFailed. The fence is the highest epoch answered Applied or
// PreconditionFailed, so a redelivered command that once failed its precondition is never
// applied later.
//
// For "acked exactly once, also across a restart" (an addition over the contract's rule): a
// State remembers the command ids it has answered (and Recover the ids of the acks read back),
// and a command id already answered gets no second ack (Buffer drops it, ApplyPending skips it).
//
// Everything here is pure: no clock, no I/O, no locks (the caller serialises).
package fencing

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// DefaultCluster is the cluster of a record without a "cluster" field: the single cluster of
// a gangstate without fleet (streams/core/cluster.py).
const DefaultCluster = "default"

// ClusterOf is the cluster a record's "cluster" field names ("" = absent = DefaultCluster).
func ClusterOf(field string) string {
	if field == "" {
		return DefaultCluster
	}
	return field
}

// wireCluster is the "cluster" field written for cluster: omitted ("") in DefaultCluster.
func wireCluster(cluster string) string {
	if cluster == DefaultCluster {
		return ""
	}
	return cluster
}

// Command is a gangstate.command/v1 record (the fields the shim reads). GangGroup names the
// group as its own cluster does (ns/a,ns/b); Cluster is that cluster ("" = DefaultCluster). A
// shim decides only the commands of its own cluster (the caller skips the others before
// anything here sees them), so nothing in a State is keyed by cluster.
type Command struct {
	Schema                 string  `json:"schema"`
	ID                     string  `json:"id"`
	Type                   string  `json:"type"`
	Cluster                string  `json:"cluster,omitempty"`
	GangGroup              string  `json:"gang_group"`
	Gang                   string  `json:"gang,omitempty"`
	Epoch                  int64   `json:"epoch"`
	Representative         string  `json:"representative"`
	ExpectedRepresentative *string `json:"expected_representative"`
	IssuedAt               string  `json:"issued_at,omitempty"`
	Cycle                  *int64  `json:"cycle,omitempty"`
	// Reason is why gangstate sent it (GangCannotFit, CapacityChanged, RepresentativeGated ...).
	Reason string `json:"reason"`
	// TTLSeconds is how long a HoldGang holds the group unless renewed (seconds, >= 1).
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
	// Message is a HoldGang's why, for the refusal status at PreEnqueue.
	Message string `json:"message,omitempty"`
}

// Outcomes of an ack (contracts.md gangstate.ack/v1).
const (
	Applied            = "Applied"
	Stale              = "Stale"
	PreconditionFailed = "PreconditionFailed"
	// AckSchema is the schema id of an ack record.
	AckSchema = "gangstate.ack/v1"
)

// Ack is a gangstate.ack/v1 record. Representative is the group's representative after the
// decision ("" is written as null); Shim names the shim that answered (so a restarted shim finds
// its own acks); Cluster is the cluster of the command answered, omitted in DefaultCluster.
type Ack struct {
	Schema         string  `json:"schema"`
	ObservedAt     string  `json:"observed_at"`
	CommandID      string  `json:"command_id"`
	GangGroup      string  `json:"gang_group"`
	Epoch          int64   `json:"epoch"`
	Outcome        string  `json:"outcome"`
	Representative *string `json:"representative"`
	Shim           string  `json:"shim,omitempty"`
	Cluster        string  `json:"cluster,omitempty"`
	// Reason says why a command was not applied (Stale, PreconditionFailed); omitted when Applied.
	Reason string `json:"reason,omitempty"`
}

// State is what a shim remembers: per gang group the fence epoch (absent = 0), the commands
// received and not yet decided (in arrival order), and the command ids already answered.
type State struct {
	Fences   map[string]int64
	Pending  map[string][]Command
	Answered map[string]bool
	// answeredIn lists, per gang group, the ids in Answered (for Forget; nil until needed)
	answeredIn map[string][]string
}

// NewState returns an empty State.
func NewState() *State {
	return &State{Fences: map[string]int64{}, Pending: map[string][]Command{}, Answered: map[string]bool{}}
}

// answer remembers command id of group as answered.
func (s *State) answer(group, id string) {
	if s.Answered[id] {
		return
	}
	s.Answered[id] = true
	if s.answeredIn == nil {
		s.answeredIn = map[string][]string{}
	}
	s.answeredIn[group] = append(s.answeredIn[group], id)
}

// AnsweredGroups lists the gang groups with answered command ids remembered, sorted.
func (s *State) AnsweredGroups() []string { return slices.Sorted(maps.Keys(s.answeredIn)) }

// Forget drops the command ids answered for group and its buffered commands, once the group
// is gone from the scheduler's gang cache. Its fence stays (an epoch never goes back,
// docs/contracts.md), so a command of the group delivered again is answered Stale, not applied.
func (s *State) Forget(group string) {
	for _, id := range s.answeredIn[group] {
		delete(s.Answered, id)
	}
	delete(s.answeredIn, group)
	delete(s.Pending, group)
}

// Fence is the group's fence epoch (0 when no command of the group was answered).
func (s *State) Fence(group string) int64 { return s.Fences[group] }

// Buffer keeps a received command until its group's next apply point. A command already
// buffered (same id) is not buffered twice; one already answered is dropped (it was acked
// before: no second ack). Returns true when the command was buffered.
func (s *State) Buffer(c Command) bool {
	if s.Answered[c.ID] {
		return false
	}
	for _, q := range s.Pending[c.GangGroup] {
		if q.ID == c.ID {
			return false
		}
	}
	s.Pending[c.GangGroup] = append(s.Pending[c.GangGroup], c)
	return true
}

// Groups lists the gang groups with buffered commands, sorted.
func (s *State) Groups() []string { return slices.Sorted(maps.Keys(s.Pending)) }

// Unpublished is the node written for a member nominated by this cycle's PostFilter whose
// nominated node is not on its pod yet (kube-scheduler sets status.nominatedNodeName after
// PostFilter returns: schedule_one.go handleSchedulingFailure).
const Unpublished = ""

// Decide answers one command against the group's current representative (current, "" = none),
// the group's pending members (candidates, ns/name; nil = not checked) and the pending members
// with a nominated node (nominated, ns/name -> node name, Unpublished when not known yet; nil
// or empty = none). It returns the outcome, the representative after the decision and the
// reason of a refusal ("" when Applied), and moves the fence:
//   - Stale when the epoch is not greater than the fence (fence unchanged);
//   - PreconditionFailed when a member is nominated and the command's representative is not
//     one of the nominated members ("preemption in progress: ns/p-0 nominated to node-a");
//   - PreconditionFailed when the compare-and-swap fails: SwitchRepresentative needs
//     expected_representative == current; ElectRepresentative needs no representative or the
//     expected one; and the new representative must be among candidates when they are given;
//   - Applied otherwise: the command's representative is the new one.
//
// The command id is remembered as answered either way. A HoldGang, ReleaseGang or ActivateGang
// is decided by DecideHold with no off switch set (the shim decides those at once with its own
// checks; they are never buffered).
func (s *State) Decide(c Command, current string, candidates []string,
	nominated map[string]string) (string, string, string) {
	if DecidedAtOnce(c.Type) {
		return s.DecideHold(c, current, nominated, HoldChecks{})
	}
	s.answer(c.GangGroup, c.ID)
	if c.Epoch <= s.Fences[c.GangGroup] {
		return Stale, current, fmt.Sprintf("epoch %d is not above the gang group's fence %d",
			c.Epoch, s.Fences[c.GangGroup])
	}
	s.Fences[c.GangGroup] = c.Epoch
	if reason := PreemptionRefusal(c.Representative, nominated); reason != "" {
		return PreconditionFailed, current, reason
	}
	expected := ""
	if c.ExpectedRepresentative != nil {
		expected = *c.ExpectedRepresentative
	}
	if c.Type == "ElectRepresentative" {
		if current != "" && current != expected {
			return PreconditionFailed, current, fmt.Sprintf(
				"the gang group already has representative %s (expected %s)", current, dash(expected))
		}
	} else if current != expected {
		return PreconditionFailed, current, fmt.Sprintf(
			"expected representative %s, the gang group's is %s", dash(expected), dash(current))
	}
	if candidates != nil && !slices.Contains(candidates, c.Representative) {
		return PreconditionFailed, current, fmt.Sprintf(
			"%s is not a pending member of the gang group", dash(c.Representative))
	}
	return Applied, c.Representative, ""
}

// PreemptionRefusal is the reason a command naming target as the new representative is
// refused while members are nominated ("" when it may go on: no member nominated, or target
// is nominated itself): "preemption in progress: ns/p-0 nominated to node-a, ns/p-1
// nominated by this cycle's PostFilter" (members sorted by ns/name).
func PreemptionRefusal(target string, nominated map[string]string) string {
	if _, ok := nominated[target]; ok {
		return ""
	}
	return preemptionText(nominated)
}

// preemptionText is "preemption in progress: ..." naming every nominated member, sorted by
// ns/name ("" when none is nominated).
func preemptionText(nominated map[string]string) string {
	if len(nominated) == 0 {
		return ""
	}
	keys := make([]string, 0, len(nominated))
	for k := range nominated {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if node := nominated[k]; node != Unpublished {
			parts = append(parts, k+" nominated to "+node)
		} else {
			parts = append(parts, k+" nominated by this cycle's PostFilter")
		}
	}
	return "preemption in progress: " + strings.Join(parts, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Decision is one answered command: the command, its outcome and the representative after it.
type Decision struct {
	Command        Command
	Outcome        string
	Representative string
	Reason         string // why it was not applied ("" when Applied)
}

// ApplyPending decides every buffered command of group in epoch order (arrival order among
// equal epochs) and empties the group's buffer, with the group's candidates and nominated
// members as Decide takes them. It returns the representative to use from now on (current when
// nothing applied) and one Decision per command, in the order decided.
func (s *State) ApplyPending(group, current string, candidates []string,
	nominated map[string]string) (string, []Decision) {
	queued := s.Pending[group]
	if len(queued) == 0 {
		return current, nil
	}
	delete(s.Pending, group)
	sorted := append([]Command(nil), queued...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Epoch < sorted[j].Epoch })
	rep := current
	out := make([]Decision, 0, len(sorted))
	for _, c := range sorted {
		if s.Answered[c.ID] {
			continue
		}
		outcome, after, reason := s.Decide(c, rep, candidates, nominated)
		rep = after
		out = append(out, Decision{Command: c, Outcome: outcome, Representative: after,
			Reason: reason})
	}
	return rep, out
}

// MakeAck builds the ack record of a decision; at is the RFC 3339 observed_at. The ack is of
// the command's cluster ("cluster" omitted in DefaultCluster, whether the command named it or
// not).
func MakeAck(d Decision, at, shimID string) Ack {
	var rep *string
	if d.Representative != "" {
		r := d.Representative
		rep = &r
	}
	return Ack{Schema: AckSchema, ObservedAt: at, CommandID: d.Command.ID,
		GangGroup: d.Command.GangGroup, Epoch: d.Command.Epoch, Outcome: d.Outcome,
		Representative: rep, Shim: shimID, Cluster: wireCluster(ClusterOf(d.Command.Cluster)),
		Reason: d.Reason}
}

// Recover rebuilds a State from acks read back from gang-events after a restart: only acks of
// shimID (a shim trusts only its own answers; "" = every shim's) and of cluster ("" =
// DefaultCluster; an ack without "cluster" is of DefaultCluster) count: the shims of two
// clusters may share an id (koord-scheduler by default) and name their gang groups alike, and
// one's fences must never move the other's. Each group's fence becomes the highest epoch among
// its Applied/PreconditionFailed acks, and every acked command id is answered (never acked
// again).
func Recover(acks []Ack, shimID, cluster string) *State {
	s := NewState()
	cluster = ClusterOf(cluster)
	for _, a := range acks {
		if a.Schema != AckSchema || (shimID != "" && a.Shim != shimID) || a.GangGroup == "" ||
			ClusterOf(a.Cluster) != cluster {
			continue
		}
		s.answer(a.GangGroup, a.CommandID)
		if a.Outcome != Applied && a.Outcome != PreconditionFailed {
			continue
		}
		if a.Epoch > s.Fences[a.GangGroup] {
			s.Fences[a.GangGroup] = a.Epoch
		}
	}
	return s
}
