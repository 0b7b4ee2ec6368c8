package fencing

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ttl(n int64) *int64 { return &n }

func hold(id string, epoch int64, seconds *int64) Command {
	return Command{Schema: "gangstate.command/v1", ID: id, Type: HoldGang, GangGroup: "ns/g",
		Epoch: epoch, Representative: "ns/p-0", Reason: "GangCannotFit", TTLSeconds: seconds,
		Message: "it cannot fit"}
}

func release(id string, epoch int64) Command {
	return Command{Schema: "gangstate.command/v1", ID: id, Type: ReleaseGang, GangGroup: "ns/g",
		Epoch: epoch, Reason: "CapacityChanged"}
}

// A hold applied at 04:00:00 with ttl 180 s lapses at 04:03:00: held at 04:02:59.999, not at
// 04:03:00; renewed at 04:02:00 for 180 s it lapses at 04:05:00.
func TestHoldsLapseAtAppliedAtPlusTTL(t *testing.T) {
	h := NewHolds()
	if was := h.Hold("ns/g", "it cannot fit", at(0), 180*time.Second, 3, "ns/g#3"); was {
		t.Fatal("a first hold was not held before")
	}
	if msg, ok := h.Held("ns/g", at(179*time.Second+999*time.Millisecond)); !ok || msg != "it cannot fit" {
		t.Fatalf("held just before the lapse: %q %v", msg, ok)
	}
	if _, ok := h.Held("ns/g", at(180*time.Second)); ok {
		t.Fatal("held at applied-at + ttl")
	}
	if _, ok := h.Held("ns/other", at(0)); ok {
		t.Fatal("a group never held is held")
	}
	if was := h.Hold("ns/g", "still short", at(120*time.Second), 180*time.Second, 4, "ns/g#4"); !was {
		t.Fatal("a renewal finds the group held")
	}
	got, _ := h.Of("ns/g")
	want := Hold{Message: "still short", AppliedAt: at(120 * time.Second),
		ExpiresAt: at(300 * time.Second), Epoch: 4, CommandID: "ns/g#4"}
	if got != want {
		t.Fatalf("renewed hold %+v, want %+v", got, want)
	}
	if exp := h.Expired(at(299 * time.Second)); len(exp) != 0 {
		t.Fatalf("expired before 04:05:00: %v", exp)
	}
	if _, ok := h.Held("ns/g", at(200*time.Second)); !ok {
		t.Fatal("the renewal holds past the first lapse")
	}
	if exp := h.Expired(at(300 * time.Second)); !reflect.DeepEqual(exp, []string{"ns/g"}) || h.Len() != 0 {
		t.Fatalf("expired at 04:05:00: %v, left %d", exp, h.Len())
	}
	// a lapsed hold renewed is a new hold
	h.Hold("ns/g", "m", at(400*time.Second), time.Second, 5, "ns/g#5")
	if was := h.Hold("ns/g", "m", at(401*time.Second), time.Second, 6, "ns/g#6"); was {
		t.Fatal("a hold lapsed at 04:06:41 counts as held then")
	}
}

func TestReleaseDropAndExpiredAreSorted(t *testing.T) {
	h := NewHolds()
	h.Hold("ns/c", "c", at(0), 10*time.Second, 1, "ns/c#1")
	h.Hold("ns/a", "a", at(0), 10*time.Second, 1, "ns/a#1")
	h.Hold("ns/b", "b", at(0), 30*time.Second, 1, "ns/b#1")
	h.Hold("ns/d", "d", at(0), 30*time.Second, 1, "ns/d#1")
	if !h.Release("ns/d") || h.Release("ns/d") {
		t.Fatal("Release tells whether the group was held, once")
	}
	// lapsed at 04:00:10 but not swept: still remembered, Release finds it (its pods may sit refused)
	if _, ok := h.Held("ns/c", at(10*time.Second)); ok || !reflect.DeepEqual(h.Groups(), []string{"ns/a", "ns/b", "ns/c"}) {
		t.Fatalf("groups %v", h.Groups())
	}
	if exp := h.Expired(at(10 * time.Second)); !reflect.DeepEqual(exp, []string{"ns/a", "ns/c"}) {
		t.Fatalf("expired %v", exp)
	}
	if !h.Drop("ns/b") || h.Drop("ns/b") || h.Len() != 0 {
		t.Fatalf("Drop: left %v", h.Groups())
	}
	h.Hold("ns/y", "y", at(0), time.Minute, 1, "ns/y#1")
	h.Hold("ns/x", "x", at(0), time.Minute, 1, "ns/x#1")
	if all := h.DropAll(); !reflect.DeepEqual(all, []string{"ns/x", "ns/y"}) || h.Len() != 0 {
		t.Fatalf("DropAll %v, left %d", all, h.Len())
	}
	if all := h.DropAll(); len(all) != 0 {
		t.Fatalf("DropAll of nothing: %v", all)
	}
}

// Silence of 3 min: last command heard at 04:01:00, so silent from 04:04:00 on, and only while
// something is held.
func TestSilenceCountsFromTheLastCommandHeard(t *testing.T) {
	h := NewHolds()
	if h.Silent(at(time.Hour), 3*time.Minute) {
		t.Fatal("nothing held is never silent")
	}
	h.Heard(at(0))
	h.Hold("ns/g", "m", at(0), time.Hour, 1, "ns/g#1")
	h.Heard(at(time.Minute))
	h.Heard(at(30 * time.Second)) // an earlier time does not move it back
	if h.Silent(at(3*time.Minute+59*time.Second), 3*time.Minute) {
		t.Fatal("silent at 04:03:59, 2m59s after the last command")
	}
	if !h.Silent(at(4*time.Minute), 3*time.Minute) {
		t.Fatal("not silent at 04:04:00, 3m after the last command")
	}
	never := NewHolds()
	never.Hold("ns/g", "m", at(0), time.Hour, 1, "ns/g#1")
	if !never.Silent(at(0), 3*time.Minute) {
		t.Fatal("held with no command ever heard is silent")
	}
}

// DecideHold: fenced by epoch, no compare-and-swap; a HoldGang refused on a missing ttl, the
// shim's or a namespace's off switch, or a nominated member (in that order); a ReleaseGang
// always Applied when not stale. The representative is always the current one.
// activate is an ActivateGang as gangstate writes it (streams/core/rules/retry.py).
func activate(id string, epoch int64) Command {
	return Command{Schema: "gangstate.command/v1", ID: id, Type: ActivateGang, GangGroup: "ns/g",
		Epoch: epoch, Reason: "PreemptionDone"}
}

func TestDecidedAtOnce(t *testing.T) {
	for typ, want := range map[string]bool{HoldGang: true, ReleaseGang: true, ActivateGang: true,
		"SwitchRepresentative": false, "ElectRepresentative": false} {
		if DecidedAtOnce(typ) != want {
			t.Fatalf("DecidedAtOnce(%s) = %v", typ, !want)
		}
	}
}

func TestDecideHoldTable(t *testing.T) {
	cases := []struct {
		name       string
		fence      int64
		cmd        Command
		nominated  map[string]string
		checks     HoldChecks
		outcome    string
		reason     string
		fenceAfter int64
	}{
		{"hold applied", 0, hold("ns/g#1", 1, ttl(180)), nil, HoldChecks{}, Applied, "", 1},
		{"hold stale: epoch equal to the fence", 4, hold("ns/g#4", 4, ttl(180)), nil, HoldChecks{},
			Stale, "epoch 4 is not above the gang group's fence 4", 4},
		{"stale before any refusal", 9, hold("ns/g#2", 2, nil), map[string]string{"ns/p-1": "n-1"},
			HoldChecks{ShimOff: true}, Stale, "epoch 2 is not above the gang group's fence 9", 9},
		{"hold without ttl", 0, hold("ns/g#1", 1, nil), nil, HoldChecks{}, PreconditionFailed,
			"HoldGang needs ttl_seconds >= 1", 1},
		{"hold with ttl 0", 0, hold("ns/g#1", 1, ttl(0)), nil, HoldChecks{}, PreconditionFailed,
			"HoldGang needs ttl_seconds >= 1", 1},
		{"holds off in the shim", 2, hold("ns/g#3", 3, ttl(180)), map[string]string{"ns/p-1": "n-1"},
			HoldChecks{ShimOff: true}, PreconditionFailed,
			"holds are off in the scheduler shim (GANGSTATE_SHIM_HOLDS=off)", 3},
		{"holds off in two namespaces, sorted", 0, hold("ns/g#1", 1, ttl(180)), nil,
			HoldChecks{NamespacesOff: map[string]string{"team-b": "false", "team-a": "off"}},
			PreconditionFailed, "holds are off in namespace team-a (annotation gangstate.io/hold: off), " +
				"namespace team-b (annotation gangstate.io/hold: false)", 1},
		{"a member nominated, even the representative", 0, hold("ns/g#1", 1, ttl(180)),
			map[string]string{"ns/p-0": "n-1", "ns/p-1": Unpublished}, HoldChecks{}, PreconditionFailed,
			"preemption in progress: ns/p-0 nominated to n-1, ns/p-1 nominated by this cycle's PostFilter", 1},
		{"release applied while nothing is held and members nominated", 0, release("ns/g#1", 1),
			map[string]string{"ns/p-0": "n-1"}, HoldChecks{ShimOff: true}, Applied, "", 1},
		{"release stale", 5, release("ns/g#5", 5), nil, HoldChecks{}, Stale,
			"epoch 5 is not above the gang group's fence 5", 5},
		{"activate applied, also with members nominated and holds off", 2, activate("ns/g#3", 3),
			map[string]string{"ns/p-0": "n-1"}, HoldChecks{ShimOff: true}, Applied, "", 3},
		{"activate stale", 3, activate("ns/g#3", 3), nil, HoldChecks{}, Stale,
			"epoch 3 is not above the gang group's fence 3", 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewState()
			if c.fence > 0 {
				s.Fences["ns/g"] = c.fence
			}
			outcome, rep, reason := s.DecideHold(c.cmd, "ns/p-2", c.nominated, c.checks)
			if outcome != c.outcome || rep != "ns/p-2" || reason != c.reason || s.Fence("ns/g") != c.fenceAfter {
				t.Fatalf("got (%s, %q, %q, fence %d), want (%s, ns/p-2, %q, fence %d)", outcome, rep,
					reason, s.Fence("ns/g"), c.outcome, c.reason, c.fenceAfter)
			}
			if !s.Answered[c.cmd.ID] {
				t.Fatal("the command is remembered as answered")
			}
		})
	}
}

// A hold in a buffer (the shim never buffers one) is decided by Decide through DecideHold: it
// changes no representative, and a later switch still sees the one before.
func TestApplyPendingKeepsTheRepresentativeOverAHold(t *testing.T) {
	s := NewState()
	s.Buffer(hold("ns/g#1", 1, ttl(60)))
	s.Buffer(sw("ns/g#2", 2, "ns/p-0", "ns/p-1"))
	rep, ds := s.ApplyPending("ns/g", "ns/p-0", nil, nil)
	if rep != "ns/p-1" || len(ds) != 2 || ds[0].Outcome != Applied || ds[0].Representative != "ns/p-0" ||
		ds[1].Outcome != Applied {
		t.Fatalf("got %q %+v", rep, ds)
	}
}

// A HoldGang as gangstate writes it (streams/core/rules/holding.py _issue_hold) decodes with its
// reason, ttl_seconds and message; a ReleaseGang has neither of the last two.
func TestHoldCommandsDecodeFromTheWire(t *testing.T) {
	var c Command
	raw := `{"schema":"gangstate.command/v1","id":"ns/g#7","issued_at":"2026-12-02T04:00:00.000000Z",` +
		`"type":"HoldGang","gang_group":"ns/g","epoch":7,"expected_representative":null,` +
		`"representative":"","reason":"GangCannotFit","cycle":null,"ttl_seconds":180,` +
		`"message":"gangstate holds gang ns/g out of the scheduling queue: it cannot fit"}`
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	if c.Type != HoldGang || c.Reason != "GangCannotFit" || c.TTLSeconds == nil || *c.TTLSeconds != 180 ||
		c.Message != "gangstate holds gang ns/g out of the scheduling queue: it cannot fit" ||
		c.ExpectedRepresentative != nil || c.Representative != "" || !IsHold(c.Type) {
		t.Fatalf("decoded %+v", c)
	}
	var r Command
	raw = `{"schema":"gangstate.command/v1","id":"ns/g#8","type":"ReleaseGang","gang_group":"ns/g",` +
		`"epoch":8,"expected_representative":null,"representative":"ns/p-0","reason":"CapacityChanged"}`
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	if r.Type != ReleaseGang || r.Reason != "CapacityChanged" || r.TTLSeconds != nil || r.Message != "" {
		t.Fatalf("decoded %+v", r)
	}
	if IsHold("SwitchRepresentative") || IsHold("ElectRepresentative") {
		t.Fatal("representative commands are no holds")
	}
}
