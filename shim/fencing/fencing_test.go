package fencing

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
)

func ptr(s string) *string { return &s }

func sw(id string, epoch int64, expected, rep string) Command {
	var exp *string
	if expected != "" {
		exp = ptr(expected)
	}
	return Command{Schema: "gangstate.command/v1", ID: id, Type: "SwitchRepresentative",
		GangGroup: "ns/g", Epoch: epoch, Representative: rep, ExpectedRepresentative: exp}
}

func TestDecideTable(t *testing.T) {
	cases := []struct {
		name       string
		fence      int64
		cmd        Command
		current    string
		candidates []string
		outcome    string
		rep        string
		fenceAfter int64
	}{
		{"applied: CAS holds", 0, sw("ns/g#1", 1, "ns/a", "ns/b"), "ns/a", nil, Applied, "ns/b", 1},
		{"stale: epoch equal to fence", 3, sw("ns/g#3", 3, "ns/a", "ns/b"), "ns/a", nil, Stale, "ns/a", 3},
		{"stale: epoch below fence", 5, sw("ns/g#2", 2, "ns/a", "ns/b"), "ns/a", nil, Stale, "ns/a", 5},
		{"precondition: representative moved", 1, sw("ns/g#2", 2, "ns/a", "ns/b"), "ns/c", nil, PreconditionFailed, "ns/c", 2},
		{"precondition: switch with no representative", 0, sw("ns/g#1", 1, "ns/a", "ns/b"), "", nil, PreconditionFailed, "", 1},
		{"precondition: target not pending", 0, sw("ns/g#1", 1, "ns/a", "ns/b"), "ns/a", []string{"ns/a", "ns/c"}, PreconditionFailed, "ns/a", 1},
		{"applied: target pending", 0, sw("ns/g#1", 1, "ns/a", "ns/b"), "ns/a", []string{"ns/a", "ns/b"}, Applied, "ns/b", 1},
		{"elect: no representative", 0, Command{ID: "ns/g#4", Type: "ElectRepresentative", GangGroup: "ns/g", Epoch: 4, Representative: "ns/b"}, "", nil, Applied, "ns/b", 4},
		{"elect: someone else is representative", 0, Command{ID: "ns/g#4", Type: "ElectRepresentative", GangGroup: "ns/g", Epoch: 4, Representative: "ns/b"}, "ns/c", nil, PreconditionFailed, "ns/c", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewState()
			if c.fence > 0 {
				s.Fences["ns/g"] = c.fence
			}
			outcome, rep, _ := s.Decide(c.cmd, c.current, c.candidates, nil)
			if outcome != c.outcome || rep != c.rep || s.Fence("ns/g") != c.fenceAfter {
				t.Fatalf("got (%s, %q, fence %d), want (%s, %q, fence %d)", outcome, rep,
					s.Fence("ns/g"), c.outcome, c.rep, c.fenceAfter)
			}
			if !s.Answered[c.cmd.ID] {
				t.Fatalf("command %s not remembered as answered", c.cmd.ID)
			}
		})
	}
}

// A command that failed its precondition fences its epoch: redelivered later, when the
// representative it expected has come back, it is not applied.
func TestPreconditionFailedFencesRedelivery(t *testing.T) {
	s := NewState()
	cmd := sw("ns/g#2", 2, "ns/a", "ns/b")
	if out, _, _ := s.Decide(cmd, "ns/c", nil, nil); out != PreconditionFailed {
		t.Fatalf("first answer %s", out)
	}
	s2 := &State{Fences: s.Fences, Pending: map[string][]Command{}, Answered: map[string]bool{}}
	if out, rep, _ := s2.Decide(cmd, "ns/a", nil, nil); out != Stale || rep != "ns/a" {
		t.Fatalf("redelivery answered %s %q, want Stale ns/a", out, rep)
	}
}

// ApplyPending decides in epoch order whatever the arrival order; each decision sees the
// representative the previous one left.
func TestApplyPendingEpochOrder(t *testing.T) {
	s := NewState()
	s.Buffer(sw("ns/g#3", 3, "ns/b", "ns/c"))
	s.Buffer(sw("ns/g#2", 2, "ns/a", "ns/b"))
	s.Buffer(sw("ns/g#2", 2, "ns/a", "ns/b")) // same id buffered once
	rep, ds := s.ApplyPending("ns/g", "ns/a", nil, nil)
	if rep != "ns/c" || len(ds) != 2 {
		t.Fatalf("rep %q, %d decisions", rep, len(ds))
	}
	got := []string{ds[0].Command.ID + "=" + ds[0].Outcome, ds[1].Command.ID + "=" + ds[1].Outcome}
	want := []string{"ns/g#2=Applied", "ns/g#3=Applied"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if len(s.Pending["ns/g"]) != 0 || s.Fence("ns/g") != 3 {
		t.Fatalf("buffer %v fence %d", s.Pending, s.Fence("ns/g"))
	}
	if r2, ds2 := s.ApplyPending("ns/g", "ns/c", nil, nil); r2 != "ns/c" || ds2 != nil {
		t.Fatalf("empty buffer gave %q %v", r2, ds2)
	}
}

// Across a restart: the fences and the answered ids come back from the shim's own acks; a
// redelivered command already acked is not buffered (no second ack), a new one is decided
// against the recovered fence.
func TestRecoverAcrossRestart(t *testing.T) {
	before := NewState()
	before.Buffer(sw("ns/g#1", 1, "ns/a", "ns/b"))
	before.Buffer(sw("ns/g#2", 2, "ns/x", "ns/c"))
	_, ds := before.ApplyPending("ns/g", "ns/a", nil, nil)
	var acks []Ack
	for _, d := range ds {
		acks = append(acks, MakeAck(d, "2026-12-01T07:00:00.000000Z", "shim-1"))
	}
	if acks[0].Outcome != Applied || acks[1].Outcome != PreconditionFailed {
		t.Fatalf("acks %+v", acks)
	}
	if *acks[0].Representative != "ns/b" || *acks[1].Representative != "ns/b" {
		t.Fatalf("ack representatives %q %q", *acks[0].Representative, *acks[1].Representative)
	}
	foreign := Ack{Schema: AckSchema, CommandID: "ns/g#9", GangGroup: "ns/g", Epoch: 9,
		Outcome: Applied, Shim: "other"}
	after := Recover(append(acks, foreign), "shim-1", "")
	if after.Fence("ns/g") != 2 {
		t.Fatalf("recovered fence %d, want 2 (the other shim's ack does not count)", after.Fence("ns/g"))
	}
	if after.Buffer(sw("ns/g#1", 1, "ns/a", "ns/b")) || after.Buffer(sw("ns/g#2", 2, "ns/x", "ns/c")) {
		t.Fatal("a command acked before the restart was buffered again")
	}
	if !after.Buffer(sw("ns/g#3", 3, "ns/b", "ns/a")) {
		t.Fatal("a new command was not buffered")
	}
	rep, ds2 := after.ApplyPending("ns/g", "ns/b", []string{"ns/a", "ns/b"}, nil)
	if rep != "ns/a" || len(ds2) != 1 || ds2[0].Outcome != Applied || after.Fence("ns/g") != 3 {
		t.Fatalf("after restart: rep %q decisions %+v fence %d", rep, ds2, after.Fence("ns/g"))
	}
	// a Stale ack does not move the fence but its id is answered
	st := Recover([]Ack{{Schema: AckSchema, CommandID: "ns/g#1", GangGroup: "ns/g", Epoch: 1,
		Outcome: Stale, Shim: "shim-1"}}, "shim-1", "")
	if st.Fence("ns/g") != 0 || !st.Answered["ns/g#1"] {
		t.Fatalf("stale ack: fence %d answered %v", st.Fence("ns/g"), st.Answered)
	}
}

func TestMakeAckNullRepresentative(t *testing.T) {
	a := MakeAck(Decision{Command: sw("ns/g#1", 1, "ns/a", "ns/b"), Outcome: PreconditionFailed}, "t", "s")
	if a.Representative != nil || a.Epoch != 1 || a.GangGroup != "ns/g" || a.Schema != AckSchema {
		t.Fatalf("%+v", a)
	}
}

// The named sequences of the contract's fencing (docs/contracts.md "gangstate.command/v1",
// "gangstate.ack/v1"), ported from the Python shim's tests when it was retired with the
// simulator: the representative before, the commands decided one after the other as they
// arrive, the outcomes and the representative after, worked out by hand from the rule above.
const seqG = "team-a/llm"

var w0, w1, w2, w3 = seqG + "-w-0", seqG + "-w-1", seqG + "-w-2", seqG + "-w-3"

func cmdG(group string, epoch int64, expected, rep, typ string) Command {
	var exp *string
	if expected != "" {
		exp = ptr(expected)
	}
	return Command{Schema: "gangstate.command/v1", ID: group + "#" + strconv.FormatInt(epoch, 10), Type: typ,
		GangGroup: group, Epoch: epoch, Representative: rep, ExpectedRepresentative: exp}
}

func swG(epoch int64, expected, rep string) Command {
	return cmdG(seqG, epoch, expected, rep, "SwitchRepresentative")
}

func elG(epoch int64, expected, rep string) Command {
	return cmdG(seqG, epoch, expected, rep, "ElectRepresentative")
}

func TestNamedSequences(t *testing.T) {
	cases := []struct {
		name     string
		before   string
		commands []Command
		outcomes []string
		after    string
	}{
		{"switch applies", w0, []Command{swG(1, w0, w3)}, []string{Applied}, w3},
		{"duplicate is stale", w0, []Command{swG(1, w0, w3), swG(1, w0, w3)}, []string{Applied, Stale}, w3},
		{"older epoch after newer is stale", w0, []Command{swG(2, w0, w2), swG(1, w0, w3)}, []string{Applied, Stale}, w2},
		{"expected no longer current", w1, []Command{swG(1, w0, w3)}, []string{PreconditionFailed}, w1},
		{"chain of switches in order", w0, []Command{swG(1, w0, w1), swG(2, w1, w2)}, []string{Applied, Applied}, w2},
		{"reordered chain: second fails its precondition, first is then stale", w0,
			[]Command{swG(2, w1, w2), swG(1, w0, w1)}, []string{PreconditionFailed, Stale}, w0},
		{"elect when the group has none", "", []Command{elG(1, w0, w2)}, []string{Applied}, w2},
		{"elect when the old one is still current", w0, []Command{elG(1, w0, w2)}, []string{Applied}, w2},
		{"elect when another pod is representative", w1, []Command{elG(1, w0, w2)}, []string{PreconditionFailed}, w1},
		{"switch when the group has no representative", "", []Command{swG(1, w0, w3)}, []string{PreconditionFailed}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, rep, got := NewState(), c.before, []string{}
			for _, cmd := range c.commands {
				outcome, after, _ := s.Decide(cmd, rep, nil, nil)
				rep = after
				got = append(got, outcome)
			}
			if !reflect.DeepEqual(got, c.outcomes) || rep != c.after {
				t.Fatalf("got %v, representative %q; want %v, %q", got, rep, c.outcomes, c.after)
			}
		})
	}
}

// Buffered application at AfterPostFilter / PreEnqueue: the commands buffered, the
// representative then, the decisions (command id, outcome) and the representative after.
func TestNamedBufferedApplication(t *testing.T) {
	cases := []struct {
		name     string
		buffered []Command
		current  string
		acks     []string
		rep      string
	}{
		{"nothing buffered", nil, w0, []string{}, w0},
		{"applied in epoch order whatever the arrival order", []Command{swG(2, w1, w2), swG(1, w0, w1)}, w0,
			[]string{seqG + "#1=Applied", seqG + "#2=Applied"}, w2},
		{"a duplicate in the buffer is buffered once", []Command{swG(1, w0, w1), swG(1, w0, w1)}, w0,
			[]string{seqG + "#1=Applied"}, w1},
		{"stale second switch from the same old representative", []Command{swG(1, w0, w1), swG(2, w0, w2)}, w0,
			[]string{seqG + "#1=Applied", seqG + "#2=PreconditionFailed"}, w1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewState()
			for _, cmd := range c.buffered {
				s.Buffer(cmd)
			}
			rep, ds := s.ApplyPending(seqG, c.current, nil, nil)
			got := []string{}
			for _, d := range ds {
				got = append(got, d.Command.ID+"="+d.Outcome)
			}
			if !reflect.DeepEqual(got, c.acks) || rep != c.rep {
				t.Fatalf("got %v, representative %q; want %v, %q", got, rep, c.acks, c.rep)
			}
			if len(s.Pending[seqG]) != 0 {
				t.Fatalf("buffer not emptied: %v", s.Pending[seqG])
			}
			// a second apply point with nothing new does nothing
			if again, none := s.ApplyPending(seqG, rep, nil, nil); again != rep || len(none) != 0 {
				t.Fatalf("second apply point gave %q %v", again, none)
			}
		})
	}
}

// Commands of other gang groups stay buffered, and fences are per gang group.
func TestOtherGroupsStayBufferedAndFencedApart(t *testing.T) {
	other := cmdG("team-b/moe", 1, "team-b/moe-0", "team-b/moe-1", "SwitchRepresentative")
	s := NewState()
	s.Buffer(swG(5, w0, w1))
	s.Buffer(other)
	rep, ds := s.ApplyPending(seqG, w0, nil, nil)
	if rep != w1 || len(ds) != 1 || !reflect.DeepEqual(s.Pending, map[string][]Command{"team-b/moe": {other}}) {
		t.Fatalf("rep %q, %d decisions, buffer %v", rep, len(ds), s.Pending)
	}
	if rep2, ds2 := s.ApplyPending("team-b/moe", "team-b/moe-0", nil, nil); rep2 != "team-b/moe-1" || ds2[0].Outcome != Applied {
		t.Fatalf("other group: %q %+v", rep2, ds2)
	}
	if !reflect.DeepEqual(s.Fences, map[string]int64{seqG: 5, "team-b/moe": 1}) {
		t.Fatalf("fences %v", s.Fences)
	}
}

// Recovery from acks read back: (outcome, epoch, shim) per ack, the shim recovering, the fences.
func TestNamedRecovery(t *testing.T) {
	type ack struct {
		outcome string
		epoch   int64
		shim    string
	}
	cases := []struct {
		name   string
		shim   string
		acks   []ack
		fences map[string]int64
	}{
		{"highest applied epoch wins", "", []ack{{Applied, 3, ""}, {Applied, 5, ""}, {Stale, 9, ""}}, map[string]int64{seqG: 5}},
		{"precondition failures fence too", "", []ack{{Applied, 2, ""}, {PreconditionFailed, 4, ""}}, map[string]int64{seqG: 4}},
		{"only this shim's acks count", "s1", []ack{{Applied, 2, "s1"}, {Applied, 8, "s2"}, {Applied, 3, ""}}, map[string]int64{seqG: 2}},
		{"no acks: nothing fenced", "", nil, map[string]int64{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var records []Ack
			for _, a := range c.acks {
				records = append(records, MakeAck(Decision{Command: swG(a.epoch, w0, w1), Outcome: a.outcome,
					Representative: w1}, "2026-11-02T09:00:00.000000Z", a.shim))
			}
			// a record of another schema read back from gang-events counts for nothing
			records = append(records, Ack{Schema: "gangstate.cycle/v1", GangGroup: seqG, Epoch: 99, Outcome: Applied})
			if got := Recover(records, c.shim, "").Fences; !reflect.DeepEqual(got, c.fences) {
				t.Fatalf("fences %v, want %v", got, c.fences)
			}
		})
	}
}

// A restarted shim, its scheduler's representative back at w0: the redelivered command is
// Stale (the fence holds although the compare-and-swap would), a newer one applies.
func TestRestartNeverAppliesTwice(t *testing.T) {
	s := NewState()
	out, rep, _ := s.Decide(swG(4, w0, w3), w0, nil, nil)
	restarted := Recover([]Ack{MakeAck(Decision{Command: swG(4, w0, w3), Outcome: out, Representative: rep},
		"2026-11-02T09:00:04.000000Z", "s1")}, "s1", "")
	if again, _, _ := restarted.Decide(swG(4, w0, w3), w0, nil, nil); again != Stale {
		t.Fatalf("redelivered after restart: %s, want Stale", again)
	}
	if newer, r, _ := restarted.Decide(swG(5, w0, w2), w0, nil, nil); newer != Applied || r != w2 {
		t.Fatalf("newer after restart: %s %q, want Applied %q", newer, r, w2)
	}
}

// Commands and preemption (docs/shim.md): while members are nominated, only a nominated member
// may become the representative; the reason names every nominated member, sorted.
func TestDecidePreemptionTable(t *testing.T) {
	elect := func(id string, epoch int64, rep string) Command {
		return Command{ID: id, Type: "ElectRepresentative", GangGroup: "ns/g", Epoch: epoch, Representative: rep}
	}
	pending := []string{"ns/p-0", "ns/p-1", "ns/p-2"}
	cases := []struct {
		name       string
		fence      int64
		cmd        Command
		current    string
		nominated  map[string]string
		outcome    string
		rep        string
		reason     string
		fenceAfter int64
	}{
		{"no member nominated: decided as today", 0, sw("ns/g#1", 1, "ns/p-0", "ns/p-2"), "ns/p-0",
			nil, Applied, "ns/p-2", "", 1},
		{"empty nomination map: decided as today", 0, sw("ns/g#1", 1, "ns/p-0", "ns/p-2"), "ns/p-0",
			map[string]string{}, Applied, "ns/p-2", "", 1},
		{"target nominated: applied", 0, sw("ns/g#1", 1, "ns/p-2", "ns/p-0"), "ns/p-2",
			map[string]string{"ns/p-0": "node-a"}, Applied, "ns/p-0", "", 1},
		{"target nominated, CAS fails: the CAS reason", 0, sw("ns/g#1", 1, "ns/p-2", "ns/p-0"), "ns/p-1",
			map[string]string{"ns/p-0": "node-a"}, PreconditionFailed, "ns/p-1",
			"expected representative ns/p-2, the gang group's is ns/p-1", 1},
		{"target not nominated: refused, fence moved", 0, sw("ns/g#1", 1, "ns/p-0", "ns/p-2"), "ns/p-0",
			map[string]string{"ns/p-0": "node-a"}, PreconditionFailed, "ns/p-0",
			"preemption in progress: ns/p-0 nominated to node-a", 1},
		{"two nominated, sorted; elect a third", 0, elect("ns/g#2", 2, "ns/p-2"), "",
			map[string]string{"ns/p-1": "node-b", "ns/p-0": "node-a"}, PreconditionFailed, "",
			"preemption in progress: ns/p-0 nominated to node-a, ns/p-1 nominated to node-b", 2},
		{"nominated in this cycle, node not published yet", 0, sw("ns/g#1", 1, "", "ns/p-1"), "",
			map[string]string{"ns/p-0": Unpublished}, PreconditionFailed, "",
			"preemption in progress: ns/p-0 nominated by this cycle's PostFilter", 1},
		{"elect a nominated member with none representative", 0, elect("ns/g#3", 3, "ns/p-1"), "",
			map[string]string{"ns/p-1": "node-b", "ns/p-0": "node-a"}, Applied, "ns/p-1", "", 3},
		{"stale comes first", 4, sw("ns/g#2", 2, "ns/p-0", "ns/p-2"), "ns/p-0",
			map[string]string{"ns/p-0": "node-a"}, Stale, "ns/p-0",
			"epoch 2 is not above the gang group's fence 4", 4},
		{"elect refused: someone else is representative", 0, elect("ns/g#5", 5, "ns/p-1"), "ns/p-0",
			nil, PreconditionFailed, "ns/p-0", "the gang group already has representative ns/p-0 (expected -)", 5},
		{"target not pending", 0, sw("ns/g#1", 1, "ns/p-0", "ns/x"), "ns/p-0",
			nil, PreconditionFailed, "ns/p-0", "ns/x is not a pending member of the gang group", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewState()
			if c.fence > 0 {
				s.Fences["ns/g"] = c.fence
			}
			outcome, rep, reason := s.Decide(c.cmd, c.current, pending, c.nominated)
			if outcome != c.outcome || rep != c.rep || reason != c.reason || s.Fence("ns/g") != c.fenceAfter {
				t.Fatalf("got (%s, %q, %q, fence %d), want (%s, %q, %q, fence %d)", outcome, rep,
					reason, s.Fence("ns/g"), c.outcome, c.rep, c.reason, c.fenceAfter)
			}
		})
	}
}

// ApplyPending carries the nominated members to every decision and the reason to the ack.
func TestApplyPendingPreemptionAck(t *testing.T) {
	s := NewState()
	s.Buffer(sw("ns/g#1", 1, "ns/p-0", "ns/p-1"))
	s.Buffer(sw("ns/g#2", 2, "ns/p-0", "ns/p-0"))
	rep, ds := s.ApplyPending("ns/g", "ns/p-0", []string{"ns/p-0", "ns/p-1"},
		map[string]string{"ns/p-0": "node-a"})
	if rep != "ns/p-0" || len(ds) != 2 || ds[0].Outcome != PreconditionFailed || ds[1].Outcome != Applied {
		t.Fatalf("got %q %+v", rep, ds)
	}
	got := MakeAck(ds[0], "t", "s")
	want := Ack{Schema: AckSchema, ObservedAt: "t", CommandID: "ns/g#1", GangGroup: "ns/g", Epoch: 1,
		Outcome: PreconditionFailed, Representative: ptr("ns/p-0"), Shim: "s",
		Reason: "preemption in progress: ns/p-0 nominated to node-a"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if a := MakeAck(ds[1], "t", "s"); a.Reason != "" {
		t.Fatalf("an Applied ack has no reason, got %q", a.Reason)
	}
}

func TestForgetDropsTheAnsweredIdsOfAGroupButKeepsItsFence(t *testing.T) {
	s := Recover([]Ack{{Schema: AckSchema, CommandID: "ns/a#2", GangGroup: "ns/a", Epoch: 2,
		Outcome: Applied, Shim: "x"}}, "x", "")
	c := Command{Schema: "gangstate.command/v1", ID: "ns/a#3", GangGroup: "ns/a", Epoch: 3,
		Representative: "ns/p-1"}
	s.Decide(c, "", nil, nil)
	s.Buffer(Command{ID: "ns/b#1", GangGroup: "ns/b", Epoch: 1})
	if got := s.AnsweredGroups(); len(got) != 1 || got[0] != "ns/a" {
		t.Fatalf("answered groups: %v", got)
	}
	s.Forget("ns/a")
	if len(s.Answered) != 0 || len(s.AnsweredGroups()) != 0 || s.Fence("ns/a") != 3 ||
		len(s.Pending["ns/b"]) != 1 {
		t.Fatalf("after Forget: answered %v fence %d pending %v", s.Answered, s.Fence("ns/a"), s.Pending)
	}
	// delivered again: not applied, the fence holds
	if outcome, _, _ := s.Decide(c, "", nil, nil); outcome != Stale {
		t.Fatalf("a command of a forgotten group delivered again: %s", outcome)
	}
}

// Fleets: the shims of two clusters may share an id and name their gang groups alike; a shim
// recovers its fences only from the acks of its own cluster (absent "cluster" = default).
func TestRecoverCountsOnlyTheAcksOfItsOwnCluster(t *testing.T) {
	acks := []Ack{
		{Schema: AckSchema, CommandID: "ns/g#2", GangGroup: "ns/g", Epoch: 2, Outcome: Applied, Shim: "ks"},
		{Schema: AckSchema, CommandID: "eu-1:ns/g#9", GangGroup: "ns/g", Epoch: 9, Outcome: Applied,
			Shim: "ks", Cluster: "eu-1"},
		{Schema: AckSchema, CommandID: "us-2:ns/g#5", GangGroup: "ns/g", Epoch: 5,
			Outcome: PreconditionFailed, Shim: "ks", Cluster: "us-2"},
	}
	for _, tc := range []struct {
		cluster  string
		fence    int64
		answered string
	}{{"", 2, "ns/g#2"}, {DefaultCluster, 2, "ns/g#2"}, {"eu-1", 9, "eu-1:ns/g#9"},
		{"us-2", 5, "us-2:ns/g#5"}, {"ap-3", 0, ""}} {
		s := Recover(acks, "ks", tc.cluster)
		want := map[string]bool{}
		if tc.answered != "" {
			want[tc.answered] = true
		}
		if s.Fence("ns/g") != tc.fence || !reflect.DeepEqual(s.Answered, want) {
			t.Errorf("cluster %q: fence %d answered %v, want %d %v", tc.cluster, s.Fence("ns/g"),
				s.Answered, tc.fence, want)
		}
	}
}

func TestAnAckIsOfItsCommandsCluster(t *testing.T) {
	d := Decision{Command: sw("eu-1:ns/g#1", 1, "ns/a", "ns/b"), Outcome: Applied, Representative: "ns/b"}
	d.Command.Cluster = "eu-1"
	raw, _ := json.Marshal(MakeAck(d, "t", "s"))
	want := `{"schema":"gangstate.ack/v1","observed_at":"t","command_id":"eu-1:ns/g#1",` +
		`"gang_group":"ns/g","epoch":1,"outcome":"Applied","representative":"ns/b","shim":"s",` +
		`"cluster":"eu-1"}`
	if string(raw) != want {
		t.Fatalf("ack outside default:\n got  %s\n want %s", raw, want)
	}
	// in default, named or not, the ack is as before: no "cluster"
	for _, named := range []string{"", DefaultCluster} {
		d.Command.ID, d.Command.Cluster = "ns/g#1", named
		raw, _ = json.Marshal(MakeAck(d, "t", "s"))
		want = `{"schema":"gangstate.ack/v1","observed_at":"t","command_id":"ns/g#1",` +
			`"gang_group":"ns/g","epoch":1,"outcome":"Applied","representative":"ns/b","shim":"s"}`
		if string(raw) != want {
			t.Fatalf("ack in default (command's cluster %q):\n got  %s\n want %s", named, raw, want)
		}
	}
	var c Command
	if err := json.Unmarshal([]byte(`{"schema":"gangstate.command/v1","id":"x","cluster":"eu-1"}`), &c); err != nil ||
		c.Cluster != "eu-1" || ClusterOf(c.Cluster) != "eu-1" || ClusterOf("") != DefaultCluster {
		t.Fatalf("a command's cluster: %+v %v", c, err)
	}
}
