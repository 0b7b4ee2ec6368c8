package bus

import (
	"math"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestEncodeWritesTheValueAsJSONKeyedByItsKey(t *testing.T) {
	type rec struct {
		Schema string  `json:"schema"`
		Node   *string `json:"node"`
		Code   string  `json:"code,omitempty"`
	}
	r, err := encode("gangstate.gang-events", "ns/g", rec{Schema: "gangstate.cycle/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Topic != "gangstate.gang-events" || string(r.Key) != "ns/g" ||
		string(r.Value) != `{"schema":"gangstate.cycle/v1","node":null}` || len(r.Headers) != 0 {
		t.Fatalf("record: %s %s %s %v", r.Topic, r.Key, r.Value, r.Headers)
	}
	if _, err := encode("t", "k", math.NaN()); err == nil {
		t.Fatal("a value encoding/json refuses is an error")
	}
}

func TestPublishNeverBlocksAndDropsWhatDoesNotFit(t *testing.T) {
	p := &Publisher{queue: make(chan item, 1)}
	if !p.Publish("k", "s", 1, nil) || p.Publish("k", "s", 2, nil) {
		t.Fatal("the first record is queued, the second dropped")
	}
}

func TestOffsetsAreCommittedUpToTheFirstUnanswered(t *testing.T) {
	tr := newTracker()
	for off := int64(0); off < 4; off++ {
		tr.seen(0, off)
	}
	tr.seen(1, 7)
	tr.done(0, 0)
	tr.done(0, 2)
	want := map[int32]kgo.EpochOffset{0: {Epoch: -1, Offset: 1}, 1: {Epoch: -1, Offset: 7}}
	if got := tr.commitable(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := tr.commitable(); len(got) != 0 {
		t.Fatalf("nothing new to commit: %v", got)
	}
	tr.done(0, 1)
	tr.done(0, 3)
	tr.done(1, 7)
	want = map[int32]kgo.EpochOffset{0: {Epoch: -1, Offset: 4}, 1: {Epoch: -1, Offset: 8}}
	if got := tr.commitable(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
