package fencing

import (
	"reflect"
	"testing"
)

// Which members are in a preemption: named scenarios of the cluster's facts, in order.
func TestPreemptionsMembers(t *testing.T) {
	terminating := map[string]bool{"node-a": true, "node-b": true}
	victims := func(node, member string) bool { return terminating[node] }
	type step struct {
		name    string
		do      func(p *Preemptions)
		pending map[string]string
		want    map[string]string
	}
	steps := []step{
		{"nothing nominated", nil, map[string]string{"ns/p-0": "", "ns/p-1": ""}, map[string]string{}},
		{"p-0 preempted in this cycle: the node is not on the pod yet",
			func(p *Preemptions) { p.Mark("ns/p-0") },
			map[string]string{"ns/p-0": "", "ns/p-1": ""}, map[string]string{"ns/p-0": Unpublished}},
		{"the node published", nil, map[string]string{"ns/p-0": "node-a", "ns/p-1": ""},
			map[string]string{"ns/p-0": "node-a"}},
		{"p-1 seen nominated at its PostFilter",
			func(p *Preemptions) { p.Observe("ns/p-1", "node-b") },
			map[string]string{"ns/p-0": "node-a", "ns/p-1": ""},
			map[string]string{"ns/p-0": "node-a", "ns/p-1": "node-b"}},
		{"both nominations cleared by a PreFilter refusal: victims still terminate", nil,
			map[string]string{"ns/p-0": "", "ns/p-1": ""},
			map[string]string{"ns/p-0": "node-a", "ns/p-1": "node-b"}},
		{"node-a's victim gone", func(p *Preemptions) { terminating["node-a"] = false },
			map[string]string{"ns/p-0": "", "ns/p-1": ""}, map[string]string{"ns/p-1": "node-b"}},
		{"node-a's victim gone is forgotten for good", func(p *Preemptions) { terminating["node-a"] = true },
			map[string]string{"ns/p-0": "", "ns/p-1": ""}, map[string]string{"ns/p-1": "node-b"}},
		{"p-1 bound: forgotten", func(p *Preemptions) { p.Forget([]string{"ns/p-1"}) },
			map[string]string{"ns/p-0": ""}, map[string]string{}},
		{"a mark undone by the pod's next PostFilter",
			func(p *Preemptions) { p.Mark("ns/p-0"); p.Unmark("ns/p-0") },
			map[string]string{"ns/p-0": ""}, map[string]string{}},
	}
	p := NewPreemptions()
	for _, s := range steps {
		if s.do != nil {
			s.do(p)
		}
		if got := p.Members(s.pending, victims); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: got %v, want %v", s.name, got, s.want)
		}
	}
}
