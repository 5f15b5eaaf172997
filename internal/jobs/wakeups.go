package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river/riverdriver"
)

// A node with nothing to do should do (almost) nothing: its queues wait on
// a wake-up, not on a short poll. This file holds the wake-ups and the
// fallback polls behind them; docs/idle.md lists every periodic wake-up
// of an idle node, its period, and why it is there.
//
// How a queue hears of new work:
//
//   - On PostgreSQL, River listens (LISTEN/NOTIFY): an insert notifies
//     the queue's producers on every node, and so does River's scheduler
//     when a job scheduled for later (an approval's expiry, a retry)
//     becomes due. River sends at most one insert notification per queue
//     per cooldown (Config.FetchCooldown), so in a burst the later inserts
//     of a cooldown are heard by nobody; trailingWake sends one more
//     notification a cooldown after them, so no insert is left to the poll.
//   - On SQLite (one process owns the file, and River's driver has no
//     listener: see internal/backend), River wakes the inserting node's
//     producer itself on every insert, debounced with a trailing edge, so
//     none is missed either. A job scheduled for later, and the periodic
//     jobs River's leader inserts, are found by the fallback poll:
//     DefaultPollWithoutListener bounds how late they start.
const (
	// DefaultPoll is a queue's fallback poll where River listens
	// (PostgreSQL): only what a lost notification (a listener
	// reconnecting) left behind waits for it.
	DefaultPoll = 5 * time.Second
	// DefaultPollWithoutListener is a queue's fallback poll on a driver
	// without a listener (SQLite), where it is also how late a scheduled
	// job (an expiry, a retry, a periodic sweep) may start after it is
	// due. On SQLite River's fetch statement is prepared afresh each time
	// (about a millisecond of CPU), so four queues polled every second
	// were most of an idle node's CPU.
	DefaultPollWithoutListener = 10 * time.Second
)

// insertTopic is the channel River's producers listen on for new jobs
// (its notifier's NotificationTopicInsert), in the client's schema.
const insertTopic = "river_insert"

// trailingWake completes River's insert notifications on a driver that
// sends them (PostgreSQL): after every insert into a queue, one more
// notification for the queue goes out within a cooldown, whatever River's
// limiter held back. It is nil on a driver without LISTEN/NOTIFY.
type trailingWake struct {
	exec     riverdriver.Executor
	cooldown time.Duration
	log      func(queue string, err error)

	mu      sync.Mutex
	due     map[string]bool // queues with a notification already due
	stopped bool
}

// now tells the queues' producers, on every node, that jobs are available
// in them: jobs the lease sweep made available again by a direct update
// (rescueLost), which River notifies nobody of. Without a listener (nil)
// it does nothing: there the only dead nodes are this one's earlier
// instances, whose jobs are rescued before the runner starts and fetches.
func (t *trailingWake) now(ctx context.Context, queues []string) error {
	if t == nil || len(queues) == 0 {
		return nil
	}
	payloads := make([]string, 0, len(queues))
	for _, q := range queues {
		b, err := json.Marshal(struct {
			Queue string `json:"queue"`
		}{q})
		if err != nil {
			return fmt.Errorf("wake queue %s: %w", q, err)
		}
		payloads = append(payloads, string(b))
	}
	if err := t.exec.NotifyMany(ctx, &riverdriver.NotifyManyParams{Topic: insertTopic, Payload: payloads}); err != nil {
		return fmt.Errorf("wake queues %v: %w", queues, err)
	}
	return nil
}

// stop sends no notification from now on: the runner stops.
func (t *trailingWake) stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

// newTrailingWake answers the trailing wake-up for driver, or nil when
// the driver tells no producer of an insert by notification.
func newTrailingWake[TTx any](driver riverdriver.Driver[TTx], cooldown time.Duration, log func(queue string, err error)) *trailingWake {
	if !driver.SupportsListener() || !driver.SupportsListenNotify() {
		return nil
	}
	return &trailingWake{exec: driver.GetExecutor(), cooldown: cooldown, log: log, due: map[string]bool{}}
}

// inserted tells of an insert into queue, committed before the call: a
// notification for the queue goes out within a cooldown. Inserts within
// one cooldown share it; it is sent after the flag is cleared, so an
// insert that found the flag set committed before the notification.
func (t *trailingWake) inserted(queue string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.due[queue] {
		t.mu.Unlock()
		return
	}
	t.due[queue] = true
	t.mu.Unlock()
	time.AfterFunc(t.cooldown, func() {
		t.mu.Lock()
		delete(t.due, queue)
		stopped := t.stopped
		t.mu.Unlock()
		if stopped {
			return
		}
		payload, _ := json.Marshal(struct {
			Queue string `json:"queue"`
		}{queue})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// A notification that fails to go leaves the insert to the
		// fallback poll.
		if err := t.exec.NotifyMany(ctx, &riverdriver.NotifyManyParams{Topic: insertTopic, Payload: []string{string(payload)}}); err != nil {
			t.log(queue, err)
		}
	})
}
