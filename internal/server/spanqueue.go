package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The span queue's sizes, explicit rather than the SDK's defaults: the
// memory a collector that does not answer can hold is queueSize spans,
// whatever the call rate.
const (
	spanQueueSize   = 2048
	spanBatchSize   = 512
	spanBatchWait   = 2 * time.Second
	spanExportLimit = 10 * time.Second
)

// spanQueue is the span processor between the invoker and the OTLP
// exporter. A call's span is handed over without waiting: into a bounded
// queue, or, when the queue is full, counted as dropped and forgotten.
// One goroutine exports the queue in batches, each within a time bound,
// so a collector that hangs or refuses costs spans (counted), never a
// call's time.
//
// It is the SDK's batch processor's job, done here because that one
// reports the spans it drops only through its own metrics pipeline; this
// one's counts are read by /metrics (toolplane_trace_spans_dropped_total).
type spanQueue struct {
	exp     sdktrace.SpanExporter
	q       chan sdktrace.ReadOnlySpan
	batch   int
	wait    time.Duration
	limit   time.Duration
	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	// full counts the spans dropped at a full queue; failed those in a
	// batch the exporter did not deliver.
	full, failed atomic.Uint64
}

// newSpanQueue starts the queue in front of exp.
func newSpanQueue(exp sdktrace.SpanExporter, size, batch int, wait, limit time.Duration) *spanQueue {
	q := &spanQueue{exp: exp, q: make(chan sdktrace.ReadOnlySpan, size), batch: batch, wait: wait, limit: limit,
		flushes: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// Dropped answers how many spans were dropped: at a full queue, and in
// batches the collector did not take.
func (q *spanQueue) Dropped() (queueFull, exportFailed uint64) {
	return q.full.Load(), q.failed.Load()
}

// OnStart does nothing: a span is queued when it ends.
func (q *spanQueue) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s without waiting, or counts it dropped.
func (q *spanQueue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	select {
	case <-q.stop:
		q.full.Add(1)
		return
	default:
	}
	select {
	case q.q <- s:
	default:
		q.full.Add(1)
	}
}

// ForceFlush exports what is queued, waiting at most until ctx ends.
func (q *spanQueue) ForceFlush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case q.flushes <- ack:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and stops the exporter, within ctx.
func (q *spanQueue) Shutdown(ctx context.Context) error {
	q.once.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return q.exp.Shutdown(ctx)
}

// run gathers the queue into batches and exports each when it is full,
// when spanBatchWait passed since the last, on a flush, and at the stop.
func (q *spanQueue) run() {
	defer close(q.done)
	buf := make([]sdktrace.ReadOnlySpan, 0, q.batch)
	tick := time.NewTicker(q.wait)
	defer tick.Stop()
	drain := func() {
		for len(buf) < q.batch {
			select {
			case s := <-q.q:
				buf = append(buf, s)
			default:
				return
			}
		}
	}
	for {
		select {
		case s := <-q.q:
			buf = append(buf, s)
			if len(buf) >= q.batch {
				buf = q.export(buf)
			}
		case <-tick.C:
			buf = q.export(buf)
		case ack := <-q.flushes:
			for drain(); len(buf) > 0; drain() {
				buf = q.export(buf)
			}
			close(ack)
		case <-q.stop:
			for drain(); len(buf) > 0; drain() {
				buf = q.export(buf)
			}
			return
		}
	}
}

// export sends buf within the export bound, counting its spans dropped
// when the collector does not take them, and answers buf emptied.
func (q *spanQueue) export(buf []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(buf) == 0 {
		return buf
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.limit)
	err := q.exp.ExportSpans(ctx, buf)
	cancel()
	if err != nil {
		q.failed.Add(uint64(len(buf)))
	}
	clear(buf)
	return buf[:0]
}
