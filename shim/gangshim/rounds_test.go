package gangshim

import (
	"fmt"
	"testing"
	"time"
)

func TestOneRoundIsOpenAtATime(t *testing.T) {
	c := &fakeClock{t: start}
	r := NewRounds(time.Second, c.now)
	if r.Current() != nil || r.Close() != nil {
		t.Fatal("no round at first")
	}
	a, detailed := r.Open("ns/a", 5, "ns/a-0")
	if !detailed || a.Skipped != 0 || a.Cycle != 5 || a.First != "ns/a-0" {
		t.Fatalf("first round: %+v %v", a, detailed)
	}
	r.Open("ns/b", 6, "ns/b-0") // Koordinator's holder keeps one context: b replaces a
	if r.Of("ns/a") != nil || r.Current().Group != "ns/b" {
		t.Fatalf("open round: %+v", r.Current())
	}
	if rd, skipped := r.Failed("ns/a", "ns/a-1", "fit"); rd != nil || skipped != 0 {
		t.Fatal("a failure of a group with no open round touches nothing")
	}
	rd, _ := r.Failed("ns/b", "ns/b-1", "fit 1")
	r.Failed("ns/b", "ns/b-2", "fit 2")
	if rd.Culprit != "ns/b-1" || rd.FitErr != "fit 1" {
		t.Fatalf("the first failure is the culprit: %+v", rd)
	}
	if closed := r.Close(); closed.Group != "ns/b" || r.Current() != nil {
		t.Fatalf("closed: %+v", closed)
	}
}

func TestSamplingCountsTheRoundsBetweenDetailedOnes(t *testing.T) {
	c := &fakeClock{t: start}
	r := NewRounds(time.Second, c.now)
	var got []string
	for _, step := range []time.Duration{0, 300 * time.Millisecond, 300 * time.Millisecond,
		500 * time.Millisecond, 100 * time.Millisecond} {
		c.advance(step)
		rd, detailed := r.Open("ns/g", 1, "ns/p-0")
		got = append(got, fmt.Sprintf("%v:%d:%v", detailed, rd.Skipped, r.Quiet("ns/g")))
	}
	// opened at 0 ms (detailed), 300, 600 (sampled out), 1100 (detailed, 2 skipped), 1200
	want := "[true:0:false false:0:true false:0:true true:2:false false:0:true]"
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	rd, skipped := r.Failed("ns/g", "ns/p-0", "fit")
	if rd == nil || skipped != 0 {
		t.Fatal("a sampled-out round has no skipped count of its own")
	}
	c.advance(1999 * time.Millisecond)
	if !r.Quiet("ns/g") {
		t.Fatal("quiet while rounds keep coming (within two intervals)")
	}
	c.advance(time.Millisecond)
	if r.Quiet("ns/g") {
		t.Fatal("not quiet once the rounds stopped for two intervals")
	}
	c.advance(time.Hour)
	rd2, detailed := r.Open("ns/g", 2, "ns/p-0")
	if !detailed || rd2.Skipped != 1 {
		t.Fatalf("the next detailed round reports the one skipped: %+v", rd2)
	}
	if _, skipped := r.Failed("ns/g", "ns/p-0", "fit"); skipped != 1 {
		t.Fatal("its first failure carries the count")
	}
	if _, skipped := r.Failed("ns/g", "ns/p-1", "fit"); skipped != 0 {
		t.Fatal("once")
	}
}

func TestForgetDropsTheGroup(t *testing.T) {
	c := &fakeClock{t: start}
	r := NewRounds(time.Second, c.now)
	r.Open("ns/a", 1, "ns/a-0")
	r.Open("ns/b", 2, "ns/b-0")
	r.Forget("ns/a")
	if fmt.Sprint(r.Groups()) != "[ns/b]" || r.Current() == nil {
		t.Fatalf("groups %v, open %+v", r.Groups(), r.Current())
	}
	r.Forget("ns/b")
	if len(r.Groups()) != 0 || r.Current() != nil {
		t.Fatal("the open round of a forgotten group is dropped")
	}
}
