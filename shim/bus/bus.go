// Package bus is the shim's Kafka shell (franz-go): a publisher into gang-events that never
// blocks its caller (a bounded buffer; records that do not fit are dropped and counted), a
// reader of the shim's own acks for recovery, and a consumer of the commands topic.
//
// Where it sits: gangshim (the scheduler plugin) calls Publish from scheduling cycles and
// handles commands it receives from Commands; nothing here decides anything about gangs.
package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"gangstate.local/shim/fencing"
)

// Metrics of the publisher, registered by the caller on the scheduler's /metrics.
var (
	Published = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gangstate_shim_records_published_total",
		Help: "Records the shim delivered to gang-events, by schema.",
	}, []string{"schema"})
	Dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gangstate_shim_records_dropped_total",
		Help: "Records the shim dropped, by schema and reason (buffer_full: the bounded buffer " +
			"was full, the scheduling cycle did not wait; encode; delivery: Kafka refused them).",
	}, []string{"schema", "reason"})
	Buffered = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gangstate_shim_buffer_records",
		Help: "Records waiting in the shim's bounded buffer for Kafka.",
	})
	Commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gangstate_shim_commands_total",
		Help: "Commands the shim answered, by outcome (Applied, Stale, PreconditionFailed), " +
			"plus duplicate (an id already answered, not acked again) and other_cluster (a " +
			"command of another cluster than GANGSTATE_CLUSTER, skipped: neither applied nor acked).",
	}, []string{"outcome"})
)

// Metrics of the round sampling and of the holds (docs/shim.md).
var (
	SampledOut = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gangstate_shim_records_sampled_out_total",
		Help: "Records not published because their round was sampled out (docs/shim.md).",
	})
	RoundsSampledOut = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gangstate_shim_rounds_sampled_out_total",
		Help: "Rounds (gang scheduling contexts) reported only as a count (rounds_skipped).",
	})
	Holds = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gangstate_shim_holds",
		Help: "Gang groups the shim holds out of the scheduling queue (HoldGang applied).",
	})
	HoldRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gangstate_shim_hold_refusals_total",
		Help: "Pods of held gang groups refused, by hook (PreEnqueue, BeforePreFilter).",
	}, []string{"hook"})
	HoldsReleased = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gangstate_shim_holds_released_total",
		Help: "Holds ended, by cause (command: ReleaseGang; ttl: its ttl_seconds lapsed; " +
			"silence: no command heard for GANGSTATE_SHIM_HOLD_SILENCE; evicted: the gang group " +
			"left the gang cache).",
	}, []string{"cause"})
)

// Collectors lists the metrics above.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{Published, Dropped, Buffered, Commands, SampledOut,
		RoundsSampledOut, Holds, HoldRefusals, HoldsReleased}
}

type item struct {
	key, schema string
	value       any
	done        func(error)
}

// Publisher queues records for gang-events; Publish never blocks.
type Publisher struct {
	cfg    Config
	client *kgo.Client
	queue  chan item
	wg     sync.WaitGroup
}

// NewPublisher connects (lazily: franz-go dials on first use) with acks=all and idempotence
// (franz-go's defaults, set explicitly) and starts the delivery goroutine.
func NewPublisher(cfg Config) (*Publisher, error) {
	opts, err := cfg.clientOpts(cfg.ConsumerGroup()) // the client id: gangstate-shim-<id>
	if err != nil {
		return nil, err
	}
	client, err := kgo.NewClient(append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// uncompressed: gangstate's Python consumers (kafka-python, aiokafka) have no snappy,
		// franz-go's default codec
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(2*time.Minute))...)
	if err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, client: client, queue: make(chan item, cfg.Buffer)}
	p.wg.Add(1)
	go p.run()
	return p, nil
}

// Publish queues value keyed by key; schema labels the metrics. It never blocks: when the
// buffer is full the record is dropped and counted (Publish then returns false). value is
// JSON-encoded by the delivery goroutine, not on the caller's scheduling cycle, so the caller
// must not change it after Publish; one that fails to encode is dropped and counted there.
// done (may be nil) is called once the record is delivered or failed; it is not called for a
// record dropped (buffer full or not encodable).
func (p *Publisher) Publish(key, schema string, value any, done func(error)) bool {
	select {
	case p.queue <- item{key: key, schema: schema, value: value, done: done}:
		Buffered.Inc()
		return true
	default:
		Dropped.WithLabelValues(schema, "buffer_full").Inc()
		return false
	}
}

func (p *Publisher) run() {
	defer p.wg.Done()
	topic := p.cfg.GangEvents()
	for it := range p.queue {
		Buffered.Dec()
		rec, err := encode(topic, it.key, it.value)
		if err != nil {
			Dropped.WithLabelValues(it.schema, "encode").Inc()
			continue
		}
		p.client.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
			if err != nil {
				Dropped.WithLabelValues(it.schema, "delivery").Inc()
			} else {
				Published.WithLabelValues(it.schema).Inc()
			}
			if it.done != nil {
				it.done(err)
			}
		})
	}
}

// encode is the Kafka record of value on topic: key as its bytes, value as encoding/json writes
// it (no trailing line break), no headers.
func encode(topic, key string, value any) (*kgo.Record, error) {
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: raw}, nil
}

// Close delivers what is buffered (waiting at most timeout) and closes the client.
func (p *Publisher) Close(timeout time.Duration) {
	close(p.queue)
	p.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = p.client.Flush(ctx)
	p.client.Close()
}

// ReadAcks reads every gangstate.ack/v1 of shimID and of the shim's cluster (an ack without
// "cluster" is of the default cluster) on gang-events from the start up to the end offsets at
// call time (no consumer group) and returns them in partition order.
func ReadAcks(ctx context.Context, cfg Config) ([]Ack, error) {
	opts, err := cfg.clientOpts("gangstate-shim-recovery-" + cfg.Key(cfg.ShimID))
	if err != nil {
		return nil, err
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	topic := cfg.GangEvents()
	ends, err := listEnds(ctx, client, topic)
	if err != nil {
		return nil, err
	}
	offsets := map[int32]kgo.Offset{}
	todo := map[int32]int64{}
	for p, end := range ends {
		if end > 0 {
			offsets[p] = kgo.NewOffset().AtStart()
			todo[p] = end
		}
	}
	var out []Ack
	if len(todo) == 0 {
		return out, nil
	}
	client.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})
	marker := []byte(`"` + fencing.AckSchema + `"`)
	for len(todo) > 0 {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading acks back from %s: %w", topic, ctx.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := todo[r.Partition]; ok && r.Offset+1 >= end {
				delete(todo, r.Partition)
			}
			if !bytes.Contains(r.Value, marker) {
				return
			}
			var a Ack
			if json.Unmarshal(r.Value, &a) == nil && a.Schema == fencing.AckSchema &&
				a.Shim == cfg.ShimID && fencing.ClusterOf(a.Cluster) == fencing.ClusterOf(cfg.Cluster) {
				out = append(out, a)
			}
		})
	}
	return out, nil
}

// Ack is the gangstate.ack/v1 record ReadAcks decodes (fencing.Ack: fencing is pure and imports
// nothing of bus).
type Ack = fencing.Ack

func listEnds(ctx context.Context, client *kgo.Client, topic string) (map[int32]int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := endOffsets(ctx, client, topic)
		if err == nil && len(ends) > 0 {
			return ends, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("end offsets of %s: %v", topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CommandHandler receives each command value with a commit function: call commit once the
// command's ack is delivered (or when it needs no ack), so that offsets move only past answered
// commands and a crash redelivers the unanswered ones.
type CommandHandler func(value []byte, commit func())

// ConsumeCommands joins the consumer group cfg.ConsumerGroup() (gangstate-shim-<shimID>, with
// the cluster outside default: gangstate-shim-eu-1:<shimID>) on the commands topic (auto commit
// off) and hands each record to handle, in partition order, until ctx ends. Every cluster's
// commands are on the one topic: the handler skips those of other clusters (and commits them).
// Offsets are committed up to the lowest record not yet committed-by-handler per partition.
func ConsumeCommands(ctx context.Context, cfg Config, handle CommandHandler) error {
	opts, err := cfg.clientOpts(cfg.ConsumerGroup())
	if err != nil {
		return err
	}
	client, err := kgo.NewClient(append(opts,
		kgo.ConsumerGroup(cfg.ConsumerGroup()),
		kgo.ConsumeTopics(cfg.CommandsTopic()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer client.Close()
	tr := newTracker()
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if offs := tr.commitable(); len(offs) > 0 {
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					client.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{
						cfg.CommandsTopic(): offs}, nil)
					cancel()
				}
			}
		}
	}()
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			part, off := r.Partition, r.Offset
			tr.seen(part, off)
			handle(r.Value, func() { tr.done(part, off) })
		})
	}
	// a last commit of what was answered
	if offs := tr.commitable(); len(offs) > 0 {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		client.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{
			cfg.CommandsTopic(): offs}, nil)
		cancel()
	}
	return nil
}

// tracker keeps, per partition, the offsets handed out and not yet answered.
type tracker struct {
	mu        sync.Mutex
	open      map[int32]map[int64]bool
	next      map[int32]int64
	committed map[int32]int64
}

func newTracker() *tracker {
	return &tracker{open: map[int32]map[int64]bool{}, next: map[int32]int64{},
		committed: map[int32]int64{}}
}

func (t *tracker) seen(p int32, off int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open[p] == nil {
		t.open[p] = map[int64]bool{}
	}
	t.open[p][off] = true
	if off+1 > t.next[p] {
		t.next[p] = off + 1
	}
}

func (t *tracker) done(p int32, off int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.open[p], off)
}

func (t *tracker) commitable() map[int32]kgo.EpochOffset {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[int32]kgo.EpochOffset{}
	for p, next := range t.next {
		upto := next
		for off := range t.open[p] {
			if off < upto {
				upto = off
			}
		}
		if upto != t.committed[p] {
			out[p] = kgo.EpochOffset{Epoch: -1, Offset: upto}
			t.committed[p] = upto
		}
	}
	return out
}
