package fencing

// Holds: gangstate's HoldGang / ReleaseGang (docs/contracts.md "Holding a gang that cannot fit",
// docs/shim.md "Holding a gang that cannot fit"). A held gang group's pods are refused at
// PreEnqueue (and BeforePreFilter) by the shim, so koord-scheduler runs no round for it, until
// a ReleaseGang, the hold's ttl_seconds lapse, or gangstate's silence.
//
// Pure like the rest of the package: the time is given (now), nothing reads a clock, no lock.

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// The command types of a hold, and ActivateGang: gangstate's word that the group's scheduler
// stopped trying it after its preemption made room (rule PR7, docs/contracts.md), so the shim
// activates its pending members.
const (
	HoldGang     = "HoldGang"
	ReleaseGang  = "ReleaseGang"
	ActivateGang = "ActivateGang"
)

// IsHold tells whether a command type is HoldGang or ReleaseGang.
func IsHold(typ string) bool { return typ == HoldGang || typ == ReleaseGang }

// DecidedAtOnce tells whether a command type is decided when it arrives (DecideHold), never
// buffered to an apply point: HoldGang, ReleaseGang and ActivateGang (none changes the
// representative, none has a compare-and-swap).
func DecidedAtOnce(typ string) bool { return IsHold(typ) || typ == ActivateGang }

// HoldChecks are the off switches a HoldGang is refused on, besides a nominated member:
// ShimOff is the shim's own (GANGSTATE_SHIM_HOLDS=off); NamespacesOff maps each namespace of
// the gang group whose Namespace carries the annotation gangstate.io/hold with an off value to
// that value ("off" or "false"; empty or nil = none).
type HoldChecks struct {
	ShimOff       bool
	NamespacesOff map[string]string
}

// DecideHold answers a HoldGang, ReleaseGang or ActivateGang against the group's current representative
// (current, "" = none; it stays the representative, a hold changes none), the pending members
// with a nominated node (nominated, as Decide takes them) and the off switches (checks). It
// returns the outcome, the representative after (always current) and the reason of a refusal
// ("" when Applied), and moves the fence as Decide does:
//   - Stale when the epoch is not greater than the fence (fence unchanged);
//   - for a HoldGang, PreconditionFailed when its ttl_seconds is missing or below 1 ("HoldGang
//     needs ttl_seconds >= 1"), when holds are off in the shim ("holds are off in the scheduler
//     shim (GANGSTATE_SHIM_HOLDS=off)"), when a namespace of the group turns them off ("holds
//     are off in namespace ns (annotation gangstate.io/hold: off)", namespaces sorted), or when
//     any member is nominated ("preemption in progress: ns/p-0 nominated to node-a"), checked in
//     that order;
//   - Applied otherwise; a ReleaseGang or an ActivateGang that is not stale is always Applied
//     (even when nothing was held, or nothing is pending).
//
// There is no representative compare-and-swap. The command id is remembered as answered.
func (s *State) DecideHold(c Command, current string, nominated map[string]string,
	checks HoldChecks) (string, string, string) {
	s.answer(c.GangGroup, c.ID)
	if c.Epoch <= s.Fences[c.GangGroup] {
		return Stale, current, fmt.Sprintf("epoch %d is not above the gang group's fence %d",
			c.Epoch, s.Fences[c.GangGroup])
	}
	s.Fences[c.GangGroup] = c.Epoch
	if c.Type != HoldGang {
		return Applied, current, ""
	}
	if c.TTLSeconds == nil || *c.TTLSeconds < 1 {
		return PreconditionFailed, current, "HoldGang needs ttl_seconds >= 1"
	}
	if checks.ShimOff {
		return PreconditionFailed, current,
			"holds are off in the scheduler shim (GANGSTATE_SHIM_HOLDS=off)"
	}
	if len(checks.NamespacesOff) > 0 {
		parts := make([]string, 0, len(checks.NamespacesOff))
		for _, ns := range slices.Sorted(maps.Keys(checks.NamespacesOff)) {
			parts = append(parts, fmt.Sprintf("namespace %s (annotation gangstate.io/hold: %s)",
				ns, checks.NamespacesOff[ns]))
		}
		return PreconditionFailed, current, "holds are off in " + strings.Join(parts, ", ")
	}
	if reason := preemptionText(nominated); reason != "" {
		return PreconditionFailed, current, reason
	}
	return Applied, current, ""
}

// Hold is one gang group held: the HoldGang's message, when it was applied and when it lapses
// (AppliedAt + ttl_seconds), its epoch and command id (the latest HoldGang: a renewal replaces
// them).
type Hold struct {
	Message   string
	AppliedAt time.Time
	ExpiresAt time.Time
	Epoch     int64
	CommandID string
}

// Holds is the shim's memory of held gang groups (gang group id -> Hold) and of when it last
// heard a command of gangstate (any command, for the silence rule). It lives in memory only: a
// restarted shim holds nothing until gangstate renews (docs/shim.md).
type Holds struct {
	held    map[string]Hold
	heardAt time.Time
	heard   bool
}

// NewHolds returns an empty tracker.
func NewHolds() *Holds { return &Holds{held: map[string]Hold{}} }

// Hold holds group from now for ttl with message, from the HoldGang of epoch and commandID; a
// group already held is renewed (its hold replaced). It returns whether the group was held
// (and not lapsed) before.
func (h *Holds) Hold(group, message string, now time.Time, ttl time.Duration, epoch int64,
	commandID string) bool {
	_, was := h.Held(group, now)
	h.held[group] = Hold{Message: message, AppliedAt: now, ExpiresAt: now.Add(ttl), Epoch: epoch,
		CommandID: commandID}
	return was
}

// Release ends group's hold; it returns whether the group was held (a lapsed hold not yet
// swept counts: its pods may still sit refused).
func (h *Holds) Release(group string) bool {
	_, was := h.held[group]
	delete(h.held, group)
	return was
}

// Drop forgets group's hold (the group left the gang cache); it returns whether there was one.
func (h *Holds) Drop(group string) bool { return h.Release(group) }

// Held is group's hold message and true while it is held at now: from its AppliedAt up to, not
// including, its ExpiresAt (a lapsed hold is not held, whether or not Expired has swept it).
func (h *Holds) Held(group string, now time.Time) (string, bool) {
	hd, ok := h.held[group]
	if !ok || !now.Before(hd.ExpiresAt) {
		return "", false
	}
	return hd.Message, true
}

// Of is group's hold as remembered (lapsed or not) and whether there is one.
func (h *Holds) Of(group string) (Hold, bool) {
	hd, ok := h.held[group]
	return hd, ok
}

// Expired removes and returns the groups whose hold lapsed at now (ExpiresAt <= now), sorted.
func (h *Holds) Expired(now time.Time) []string {
	var out []string
	for g, hd := range h.held {
		if !now.Before(hd.ExpiresAt) {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	for _, g := range out {
		delete(h.held, g)
	}
	return out
}

// DropAll removes and returns every held group, sorted.
func (h *Holds) DropAll() []string {
	out := h.Groups()
	h.held = map[string]Hold{}
	return out
}

// Groups lists the held groups (lapsed ones not yet swept included), sorted.
func (h *Holds) Groups() []string { return slices.Sorted(maps.Keys(h.held)) }

// Len is the number of held groups (lapsed ones not yet swept included).
func (h *Holds) Len() int { return len(h.held) }

// Heard notes that a command of gangstate was received at now.
func (h *Holds) Heard(now time.Time) {
	if !h.heard || now.After(h.heardAt) {
		h.heardAt, h.heard = now, true
	}
}

// Silent tells whether groups are held and no command was heard for at least silence at now
// (never heard counts as silent): then every hold is to be dropped (gangstate stopped, the
// gangs must not stay held by a shim nobody speaks to).
func (h *Holds) Silent(now time.Time, silence time.Duration) bool {
	return len(h.held) > 0 && (!h.heard || now.Sub(h.heardAt) >= silence)
}
