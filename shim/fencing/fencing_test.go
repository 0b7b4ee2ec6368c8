package fencing

import (
	"reflect"
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
			outcome, rep := s.Decide(c.cmd, c.current, c.candidates)
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
	if out, _ := s.Decide(cmd, "ns/c", nil); out != PreconditionFailed {
		t.Fatalf("first answer %s", out)
	}
	s2 := &State{Fences: s.Fences, Pending: map[string][]Command{}, Answered: map[string]bool{}}
	if out, rep := s2.Decide(cmd, "ns/a", nil); out != Stale || rep != "ns/a" {
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
	rep, ds := s.ApplyPending("ns/g", "ns/a", nil)
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
	if r2, ds2 := s.ApplyPending("ns/g", "ns/c", nil); r2 != "ns/c" || ds2 != nil {
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
	_, ds := before.ApplyPending("ns/g", "ns/a", nil)
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
	after := Recover(append(acks, foreign), "shim-1")
	if after.Fence("ns/g") != 2 {
		t.Fatalf("recovered fence %d, want 2 (the other shim's ack does not count)", after.Fence("ns/g"))
	}
	if after.Buffer(sw("ns/g#1", 1, "ns/a", "ns/b")) || after.Buffer(sw("ns/g#2", 2, "ns/x", "ns/c")) {
		t.Fatal("a command acked before the restart was buffered again")
	}
	if !after.Buffer(sw("ns/g#3", 3, "ns/b", "ns/a")) {
		t.Fatal("a new command was not buffered")
	}
	rep, ds2 := after.ApplyPending("ns/g", "ns/b", []string{"ns/a", "ns/b"})
	if rep != "ns/a" || len(ds2) != 1 || ds2[0].Outcome != Applied || after.Fence("ns/g") != 3 {
		t.Fatalf("after restart: rep %q decisions %+v fence %d", rep, ds2, after.Fence("ns/g"))
	}
	// a Stale ack does not move the fence but its id is answered
	st := Recover([]Ack{{Schema: AckSchema, CommandID: "ns/g#1", GangGroup: "ns/g", Epoch: 1,
		Outcome: Stale, Shim: "shim-1"}}, "shim-1")
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
