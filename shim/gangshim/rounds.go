package gangshim

import (
	"maps"
	"slices"
	"time"
)

// Round is one gang scheduling context of Koordinator (K core/gang_context.go:84-99): opened
// when a gang group's representative passes BeforePreFilter (K core/core.go:318-334), closed
// when NextPod finds nothing left to hand out (core/core.go:186-187) or Permit allows the group
// (SucceedGangScheduling, core/core.go:192-194). Koordinator holds one context at a time
// (GangSchedulingContextHolder, core/gang_context.go:51-82), so there is one open round.
type Round struct {
	Group   string // gang group id
	Cycle   int64  // the scheduling cycle that opened it (every attempt of the round carries it)
	First   string // ns/name of the member that opened it
	Culprit string // ns/name of the first member whose PostFilter ran (its fit error is FitErr)
	FitErr  string
	// Skipped counts the rounds of the group sampled out before this one; reported once (by the
	// first failure or release that takes it).
	Skipped int64
}

// sampling is what the tracker remembers of one gang group between rounds.
type sampling struct {
	detailedOnce bool      // a round of the group was reported in detail
	lastDetailed time.Time // when its last round reported in detail opened
	lastOpened   time.Time // when its last round opened
	skipped      int64     // rounds sampled out since lastDetailed
	quiet        bool      // its latest round is sampled out
}

// Rounds is the shim's round bookkeeping: the one open round and, per gang group, the memory of
// round sampling (docs/shim.md "Sampling of repeated rounds"). It is pure: the clock is given
// (now), it does no I/O and takes no lock (the Shim serialises its calls). A group's memory is
// dropped by Forget, when the group leaves Koordinator's gang cache.
type Rounds struct {
	interval time.Duration
	now      func() time.Time
	open     *Round
	groups   map[string]*sampling
}

// NewRounds returns an empty tracker: at most one round per gang group and interval is reported
// in detail; now is the clock (time.Now in the scheduler, a fake in tests).
func NewRounds(interval time.Duration, now func() time.Time) *Rounds {
	return &Rounds{interval: interval, now: now, groups: map[string]*sampling{}}
}

// Open records a round of group opened at cycle by first (ns/name) and returns it; it replaces
// any round still open, as Koordinator's holder does. The round is reported in detail (detailed
// true, its Skipped the rounds sampled out since the last detailed one) when no detailed round
// of the group opened within the interval; else it is sampled out and counted, and the group
// is quiet. koord-scheduler v1.8.0 retries a gang that cannot fit as fast as its queue allows
// (hundreds of rounds per second: the failed members go through the backoff queue,
// K core/core.go:150-190), each round repeating the last.
func (r *Rounds) Open(group string, cycle int64, first string) (rd Round, detailed bool) {
	t := r.now()
	g := r.groups[group]
	if g == nil {
		g = &sampling{}
		r.groups[group] = g
	}
	g.lastOpened = t
	rd = Round{Group: group, Cycle: cycle, First: first}
	if !g.detailedOnce || t.Sub(g.lastDetailed) >= r.interval {
		rd.Skipped, g.skipped = g.skipped, 0
		g.detailedOnce, g.lastDetailed, g.quiet, detailed = true, t, false, true
	} else {
		g.skipped++
		g.quiet = true
	}
	r.open = &rd
	return rd, detailed
}

// Of is the open round when it is group's (nil otherwise).
func (r *Rounds) Of(group string) *Round {
	if r.open != nil && r.open.Group == group {
		return r.open
	}
	return nil
}

// Current is the open round (nil when none).
func (r *Rounds) Current() *Round { return r.open }

// Failed records that member (ns/name) failed to fit in group's open round with fit error fit:
// the first such member is the round's culprit. It returns the round (nil when group has none
// open) and the count of skipped rounds to report now (taken: reported once).
func (r *Rounds) Failed(group, member, fit string) (*Round, int64) {
	rd := r.Of(group)
	if rd == nil {
		return nil, 0
	}
	if rd.Culprit == "" {
		rd.Culprit, rd.FitErr = member, fit
	}
	skipped := rd.Skipped
	rd.Skipped = 0
	return rd, skipped
}

// Close ends the open round and returns it, with the skipped rounds not reported yet (nil when
// none was open).
func (r *Rounds) Close() *Round {
	rd := r.open
	r.open = nil
	return rd
}

// Quiet tells whether group's records are sampled out now: its latest round was, and rounds
// keep coming (one opened within two intervals), so the PreEnqueue outcomes of a gang that
// stopped being retried are reported again.
func (r *Rounds) Quiet(group string) bool {
	g := r.groups[group]
	return g != nil && g.quiet && r.now().Sub(g.lastOpened) < 2*r.interval
}

// Groups lists the gang groups the tracker remembers (sorted).
func (r *Rounds) Groups() []string { return slices.Sorted(maps.Keys(r.groups)) }

// Forget drops everything remembered of group (its open round too).
func (r *Rounds) Forget(group string) {
	delete(r.groups, group)
	if r.open != nil && r.open.Group == group {
		r.open = nil
	}
}
