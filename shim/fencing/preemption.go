package fencing

// Preemptions remembers which members of gang groups are in a preemption, for Decide's
// preemption rule (docs/shim.md "Commands and preemption"). A member is in a preemption when
//   - its pod carries status.nominatedNodeName (given to Members);
//   - or it was seen nominated to a node (Observe, Members) and that node still has a victim
//     of lower priority terminating by preemption: on a Koordinator gang the nominated node is
//     cleared when Coscheduling refuses the member at PreFilter, while its victims terminate
//     (kube-scheduler v1.35.2 default_preemption.go:324-329, preemption.go:298-312);
//   - or its PostFilter ended before Coscheduling's in this cycle (Mark): DefaultPreemption
//     nominated it and the node is not on its pod yet (Unpublished), until its pod carries the
//     node, its PostFilter runs again (Unmark) or it is no longer pending.
//
// Pure: the caller serialises and answers whether a node still has victims terminating.
type Preemptions struct {
	Last   map[string]string // member (ns/name) -> the node it was last seen nominated to
	Marked map[string]bool   // members nominated by this cycle's PostFilter, node not yet known
}

// NewPreemptions returns an empty Preemptions.
func NewPreemptions() *Preemptions {
	return &Preemptions{Last: map[string]string{}, Marked: map[string]bool{}}
}

// Observe notes that member's pod carries nominated node ("" = none: nothing noted).
func (p *Preemptions) Observe(member, node string) {
	if node != "" {
		p.Last[member] = node
	}
}

// Mark notes that member's PostFilter ended before Coscheduling's in this cycle.
func (p *Preemptions) Mark(member string) { p.Marked[member] = true }

// Unmark drops member's Mark (its PostFilter ran: DefaultPreemption did not nominate it now).
func (p *Preemptions) Unmark(member string) { delete(p.Marked, member) }

// Members returns the pending members in a preemption (ns/name -> node, Unpublished when not
// known yet), for Decide. pending maps every pending member of the group to its pod's
// status.nominatedNodeName ("" = none); victimsTerminating(node, member) tells whether node
// still has a pod of lower priority than member terminating by preemption. Members seen
// nominated are remembered; marks and memories of members no longer pending or whose victims
// are gone are dropped.
func (p *Preemptions) Members(pending map[string]string,
	victimsTerminating func(node, member string) bool) map[string]string {
	out := map[string]string{}
	for member, node := range pending {
		if node != "" {
			out[member] = node
			p.Last[member] = node
			delete(p.Marked, member)
			continue
		}
		if last, ok := p.Last[member]; ok {
			if victimsTerminating(last, member) {
				out[member] = last
				continue
			}
			delete(p.Last, member)
		}
		if p.Marked[member] {
			out[member] = Unpublished
		}
	}
	return out
}

// Forget drops what is remembered of the members gone (scheduled or deleted, ns/name).
func (p *Preemptions) Forget(gone []string) {
	for _, m := range gone {
		delete(p.Last, m)
		delete(p.Marked, m)
	}
}
