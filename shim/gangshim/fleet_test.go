package gangshim

// Fleets (issue 27): one gangstate for several clusters, one shim per cluster
// (GANGSTATE_CLUSTER). On the fake framework of hooks_test.go: a shim of cluster eu-1 decides
// and acks only eu-1's commands, stamps "cluster" on what it publishes and keys it
// <cluster>:<id>; in the default cluster everything is as before fleets.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/koordinator-sh/koordinator/apis/thirdparty/scheduler-plugins/pkg/apis/scheduling/v1alpha1"

	"gangstate.local/shim/bus"
	"gangstate.local/shim/fencing"
)

// inCluster is the command value with its "cluster" field set to cluster ("" leaves it out)
// and its id prefixed with the cluster outside default, as gangstate writes it (the id starts
// with the gang's key: eu-1:ns/g#3).
func inCluster(t *testing.T, value []byte, cluster string) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(value, &c); err != nil {
		t.Fatal(err)
	}
	delete(c, "cluster")
	if cluster != "" {
		c["cluster"] = cluster
	}
	if cluster != "" && cluster != bus.DefaultCluster {
		c["id"] = cluster + ":" + c["id"].(string)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// switchRep is a SwitchRepresentative of ns/g as gangstate writes it (no "cluster").
func switchRep(epoch int64, expected, rep string) []byte {
	return []byte(fmt.Sprintf(`{"schema":"gangstate.command/v1","id":"ns/g#%d",`+
		`"type":"SwitchRepresentative","gang_group":"ns/g","epoch":%d,"representative":%q,`+
		`"expected_representative":%q,"reason":"RepresentativeGated"}`, epoch, epoch, rep, expected))
}

// published is every record published since the last take: its key and its JSON.
func (f *fixture) published() (keys, raw []string) {
	f.rec.mu.Lock()
	keys, raw = append(keys, f.rec.keys...), append(raw, f.rec.raw...)
	f.rec.mu.Unlock()
	f.rec.take()
	return keys, raw
}

func otherCluster() float64 {
	return testutil.ToFloat64(bus.Commands.WithLabelValues(OtherCluster))
}

func TestCommandsOfAnotherClusterAreNeitherAppliedNorAcked(t *testing.T) {
	f, p0, p1 := holdFixture(t)
	f.shim.cfg.Cluster = "eu-1"
	ctx := context.Background()
	f.shim.PreEnqueue(ctx, p0) // ns/p-0 is the representative
	f.rec.take()
	skipped := otherCluster()

	// every command of another cluster (absent "cluster" = default) is skipped: committed at
	// once (offsets move on), no ack, nothing buffered, decided, held or heard
	foreign := [][]byte{
		switchRep(7, "ns/p-0", "ns/p-1"),
		inCluster(t, switchRep(8, "ns/p-0", "ns/p-1"), "us-2"),
		inCluster(t, holdGang("ns/g", 9, 60, "it cannot fit"), "default"),
		inCluster(t, releaseGang("ns/g", 10), "us-2"),
	}
	for _, c := range foreign {
		acks, committed := f.command(c)
		if len(acks) != 0 || !committed {
			t.Fatalf("a command of another cluster: acks %+v committed %v (%s)", acks, committed, c)
		}
	}
	f.shim.PreEnqueue(ctx, p1)
	f.shim.PreEnqueue(ctx, p0)
	f.shim.sweepOnce()
	if acks := f.acks(); len(acks) != 0 {
		t.Fatalf("no apply point acks a command of another cluster: %+v", acks)
	}
	f.shim.mu.Lock()
	state, holds := f.shim.state, f.shim.holds
	f.shim.mu.Unlock()
	if !reflect.DeepEqual(state, fencing.NewState()) || !reflect.DeepEqual(holds, fencing.NewHolds()) ||
		len(f.shim.commit) != 0 || len(f.shim.activated) != 0 {
		t.Fatalf("a command of another cluster touched the shim: state %+v holds %+v commit %v",
			state, holds, f.shim.commit)
	}
	if rep := f.shim.representative([]string{"ns/g"}); rep != "ns/p-0" || len(f.act.activated()) != 0 {
		t.Fatalf("representative %q, activated %v", rep, f.act.activated())
	}
	if got := otherCluster() - skipped; got != 4 {
		t.Fatalf("gangstate_shim_commands_total{outcome=other_cluster} counted %v, want 4", got)
	}

	// eu-1's own HoldGang is decided and acked in eu-1, keyed eu-1:ns/g
	acks, committed := f.command(inCluster(t, holdGang("ns/g", 2, 60, "it cannot fit"), "eu-1"))
	oneAck(t, "eu-1's HoldGang", acks, "eu-1:ns/g#2", fencing.Applied, "")
	if acks[0].Cluster != "eu-1" || !committed || f.shim.state.Fence("ns/g") != 2 {
		t.Fatalf("eu-1's HoldGang: %+v committed %v fence %d", acks[0], committed, f.shim.state.Fence("ns/g"))
	}
	// another cluster's newer hold commands of a group of the same name touch neither the
	// fence nor the hold nor when gangstate was last heard
	heard := *f.shim.holds
	f.clock.advance(10 * time.Second)
	for _, c := range [][]byte{
		inCluster(t, releaseGang("ns/g", 50), "us-2"),
		releaseGang("ns/g", 51),
		inCluster(t, holdGang("ns/g", 52, 600, "other"), "us-2"),
	} {
		if acks, committed := f.command(c); len(acks) != 0 || !committed {
			t.Fatalf("another cluster's hold command: acks %+v committed %v", acks, committed)
		}
	}
	if msg, held := f.shim.holds.Held("ns/g", f.clock.now()); !held || msg != "it cannot fit" ||
		f.shim.state.Fence("ns/g") != 2 || !reflect.DeepEqual(*f.shim.holds, heard) {
		t.Fatalf("after another cluster's hold commands: held %v %q fence %d", held, msg,
			f.shim.state.Fence("ns/g"))
	}

	// eu-1's own SwitchRepresentative is applied at the next PreEnqueue and acked in eu-1
	acks, committed = f.command(inCluster(t, switchRep(3, "ns/p-0", "ns/p-1"), "eu-1"))
	if len(acks) != 0 || committed {
		t.Fatalf("buffered until an apply point: %+v %v", acks, committed)
	}
	f.shim.PreEnqueue(ctx, p1)
	keys, raw := f.published()
	var ack *fencing.Ack
	for i, r := range raw {
		if strings.Contains(r, `"schema":"gangstate.ack/v1"`) {
			if keys[i] != "eu-1:ns/g" || !strings.HasSuffix(r, `"shim":"shim-test","cluster":"eu-1"}`) {
				t.Fatalf("eu-1's ack: key %q %s", keys[i], r)
			}
			ack = &fencing.Ack{}
			_ = json.Unmarshal([]byte(r), ack)
		}
	}
	if ack == nil || ack.Outcome != fencing.Applied || ack.CommandID != "eu-1:ns/g#3" ||
		f.shim.representative([]string{"ns/g"}) != "ns/p-1" {
		t.Fatalf("eu-1's switch: %+v, representative %q", ack, f.shim.representative([]string{"ns/g"}))
	}
}

func TestInTheDefaultClusterACommandWithoutTheFieldIsItsOwn(t *testing.T) {
	f, p0, p1 := holdFixture(t)
	ctx := context.Background()
	f.shim.PreEnqueue(ctx, p0)
	f.rec.take()
	skipped := otherCluster()
	if acks, committed := f.command(inCluster(t, switchRep(5, "ns/p-0", "ns/p-1"), "eu-1")); len(acks) != 0 || !committed {
		t.Fatalf("eu-1's command in the default cluster: %+v %v", acks, committed)
	}
	if !reflect.DeepEqual(f.shim.state, fencing.NewState()) || otherCluster()-skipped != 1 {
		t.Fatalf("eu-1's command touched the default cluster's shim: %+v", f.shim.state)
	}
	// without "cluster", and with "cluster":"default", a command is the default cluster's
	for i, c := range [][]byte{switchRep(1, "ns/p-0", "ns/p-1"),
		inCluster(t, switchRep(2, "ns/p-1", "ns/p-0"), "default")} {
		if acks, _ := f.command(c); len(acks) != 0 {
			t.Fatalf("buffered until an apply point: %+v", acks)
		}
		f.shim.PreEnqueue(ctx, []*corev1.Pod{p1, p0}[i])
		keys, raw := f.published()
		n := 0
		for j, r := range raw {
			if !strings.Contains(r, `"schema":"gangstate.ack/v1"`) {
				continue
			}
			n++
			if keys[j] != "ns/g" || strings.Contains(r, `"cluster"`) ||
				!strings.Contains(r, `"outcome":"Applied"`) {
				t.Fatalf("the default cluster's ack, as before fleets: key %q %s", keys[j], r)
			}
		}
		if n != 1 {
			t.Fatalf("command %d: %d acks, want 1", i, n)
		}
	}
	if f.shim.state.Fence("ns/g") != 2 || f.shim.representative([]string{"ns/g"}) != "ns/p-0" {
		t.Fatalf("fence %d representative %q", f.shim.state.Fence("ns/g"),
			f.shim.representative([]string{"ns/g"}))
	}
}

func TestCycleRecordsCarryTheClusterAndTheQualifiedKeyOutsideDefault(t *testing.T) {
	run := func(cluster string) ([]string, []string, []Record) {
		p0 := gangPod("ns", "p-0", "g")
		f := newFixture(t, time.Second, []*v1alpha1.PodGroup{podGroup("ns", "g", 1)}, []*corev1.Pod{p0})
		f.shim.cfg.Cluster = cluster
		f.shim.PreEnqueue(context.Background(), p0)
		f.rec.mu.Lock()
		recs := append([]Record(nil), f.rec.recs...)
		f.rec.mu.Unlock()
		keys, raw := f.published()
		return keys, raw, recs
	}
	keys, raw, recs := run(bus.DefaultCluster)
	if len(raw) == 0 {
		t.Fatal("PreEnqueue publishes its outcome")
	}
	for i, r := range raw {
		if keys[i] != "ns/g" || strings.Contains(r, `"cluster"`) || recs[i].Cluster != "" ||
			!strings.Contains(r, `"shim":"shim-test","cycle":0,`) {
			t.Fatalf("a default cluster's record, as before fleets: key %q %s", keys[i], r)
		}
	}
	keys, raw2, recs := run("eu-1")
	if len(raw2) != len(raw) {
		t.Fatalf("eu-1 publishes what default does: %q", raw2)
	}
	for i, r := range raw2 {
		if keys[i] != "eu-1:ns/g" || recs[i].Cluster != "eu-1" || recs[i].Gang != "ns/g" ||
			recs[i].GangGroup != "ns/g" {
			t.Fatalf("eu-1's record: key %q %+v", keys[i], recs[i])
		}
		// the same record with "cluster":"eu-1" after "shim", nothing else changed
		if want := strings.Replace(raw[i], `"shim":"shim-test",`, `"shim":"shim-test","cluster":"eu-1",`, 1); r != want {
			t.Fatalf("eu-1's record:\n got  %s\n want %s", r, want)
		}
	}
}
