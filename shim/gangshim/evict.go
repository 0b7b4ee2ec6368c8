package gangshim

import (
	"maps"
	"slices"
	"time"
)

// evictLoop runs forgetGone every interval for as long as the process lives.
func (s *Shim) evictLoop(every time.Duration) {
	for range time.Tick(every) {
		s.forgetGone()
	}
}

// forgetGone drops what the shim remembers of every gang group none of whose gangs is in
// Koordinator's gang cache any more (the cache drops a gang when its PodGroup is deleted or,
// for a gang of annotations, with its last pod: K core/gang_cache.go:189-223, 295-323): the
// representative last published, the round memory (Rounds.Forget), the command ids answered
// for it (fencing.State.Forget) and its hold (fencing.Holds.Drop, counted with cause evicted);
// and the memory of activated commands keeps only those still buffered. A group with commands still buffered is kept until they are
// answered (the sweep decides them). The fences stay: an epoch must never go back
// (docs/contracts.md, commands). It returns the groups forgotten, sorted.
func (s *Shim) forgetGone() []string {
	s.mu.Lock()
	known := map[string]bool{}
	for g := range s.reps {
		known[g] = true
	}
	for _, g := range s.rounds.Groups() {
		known[g] = true
	}
	for _, g := range s.state.AnsweredGroups() {
		known[g] = true
	}
	for _, g := range s.holds.Groups() {
		known[g] = true
	}
	s.mu.Unlock()
	var gone []string
	for _, g := range slices.Sorted(maps.Keys(known)) {
		if !s.inCache(splitGroup(g)) {
			gone = append(gone, g)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneActivated()
	var out []string
	for _, g := range gone {
		if len(s.state.Pending[g]) > 0 {
			continue
		}
		delete(s.reps, g)
		s.rounds.Forget(g)
		s.state.Forget(g)
		out = append(out, g)
	}
	s.forgetHoldsLocked(out)
	return out
}
