package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/tick"
)

var (
	_ toolplane.ConnectionFeed = (*Store)(nil)
	_ toolplane.ChangeFeed     = (*Store)(nil)
)

// channels are where triggers announce the changes of each topic, in the
// changing transaction: connections (migration 0011), and OAuth grants
// and API keys (migration 0036), and published tool versions (migration
// 0043). Each payload is the table's schema, the
// organization and the row's ID, separated by spaces.
var channels = map[toolplane.Topic]string{
	toolplane.TopicConnections: "toolplane_connections",
	toolplane.TopicOAuth:       "toolplane_oauth",
	toolplane.TopicCatalog:     "toolplane_catalog",
	// Migration 0048.
	toolplane.TopicUpstreamSettings: "toolplane_upstream_settings",
}

// The change feed's timing (see WatchChanges).
const (
	// feedTrust is how long after a sync point was sent a watcher may
	// trust what it kept, and so how long a change takes to settle on
	// every node (ChangeSettle).
	feedTrust = time.Second
	// feedPing is how often a sync point is sent: several per feedTrust,
	// so a healthy watcher never stops trusting.
	feedPing = 150 * time.Millisecond
	// feedSilence is how long a sync point may go unheard before the
	// listening connection is taken for dead and opened again.
	feedSilence = 5 * time.Second
	// feedKeepAlive is how often a sync point is sent while the watcher
	// is not read (toolplane.TrustDemand): a dead listener is told within
	// it and feedSilence, for six statements a minute per watch on an
	// idle node. A watcher read again asks for a sync point at once.
	feedKeepAlive = 10 * time.Second
	// feedQuiet is how long a watcher goes unread before its sync points
	// slow to feedKeepAlive.
	feedQuiet = 2 * feedTrust
)

// ConnectionSettle is how long a change to a connection takes to reach
// every node's watcher, or to make it stop trusting what it kept: the
// trust a sync point gives (ChangeSettle).
func (s *Store) ConnectionSettle() time.Duration { return feedTrust }

// ChangeSettle is how long a change of any topic takes to reach every
// node's watcher, or to make it stop trusting what it kept: the trust a
// sync point gives.
func (s *Store) ChangeSettle() time.Duration { return feedTrust }

// WatchConnections tells w of every change to a connection of this
// store's schema, on every node, until ctx ends: the watch of
// TopicConnections (see WatchChanges).
func (s *Store) WatchConnections(ctx context.Context, w toolplane.ConnectionWatcher) error {
	return s.WatchChanges(ctx, toolplane.TopicConnections, toolplane.ConnectionChanges(w))
}

// WatchChanges tells w of every change of the topic in this store's
// schema, on every node, until ctx ends.
//
// It listens on a connection of its own (not the pool's), for the
// announcements of the topic's trigger (migration 0011's for connections,
// 0036's for OAuth, 0043's for the catalogue), sent in the transaction of
// each change, so they come in commit order. To know it is caught up it
// sends itself sync points: a notification, through the pool, on a channel
// only this listener hears. PostgreSQL delivers notifications in the order
// their transactions committed, so once a sync point sent at T arrives,
// every change committed before T has arrived before it; w may then trust
// what it kept until T + ChangeSettle. A change committed at C is
// therefore told to every watcher, or no watcher trusts its memory any
// longer, by C + ChangeSettle, whatever the network does: a listener
// cut off (or a pool too busy to send sync points) just stops trusting.
//
// While the listener is not connected (at start, after a fault, while it
// connects again) w is told Lost; on each new connection, once listening,
// it is told Lost again, since changes may have gone unheard between. Each
// watch listens on a connection of its own.
func (s *Store) WatchChanges(ctx context.Context, topic toolplane.Topic, w toolplane.ChangeWatcher) error {
	channel, ok := channels[topic]
	if !ok {
		return fmt.Errorf("watch changes: no topic %q: %w", topic, toolplane.ErrInvalid)
	}
	w.Lost()
	wait := 50 * time.Millisecond
	for {
		err := s.listen(ctx, channel, w)
		w.Lost()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = err // a listener lost is connected again; nothing kept is trusted meanwhile
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// listen runs one listening connection until it fails or ctx ends.
func (s *Store) listen(ctx context.Context, changesChannel string, w toolplane.ChangeWatcher) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect the listener: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The schema the store's tables are in, as the triggers name it.
	var schema string
	if err := conn.QueryRow(ctx, `SELECT n.nspname FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = 'connections'::regclass`).Scan(&schema); err != nil {
		return fmt.Errorf("find the connections table: %w", err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	syncChannel := "toolplane_sync_" + hex.EncodeToString(b)
	for _, ch := range []string{changesChannel, syncChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	// Listening from here on: what was kept before may have missed
	// changes, and is dropped.
	w.Lost()

	start := time.Now()
	var heard atomic.Int64 // the latest sync point heard, as time since start
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		// A watcher that says when it is read (toolplane.TrustDemand)
		// gets sync points every feedPing only while it is read, and
		// every feedKeepAlive otherwise; a read that found nothing
		// trusted asks for one at once.
		demand, _ := w.(toolplane.TrustDemand)
		var wake <-chan struct{}
		if demand != nil {
			wake = demand.TrustWake()
		}
		read := time.Now()
		t := time.NewTimer(feedPing)
		defer t.Stop()
		// unheard is when the earliest sync point not heard yet was
		// sent (time since start), or negative when all were heard: a
		// listener is judged by the silence since then, however long
		// the keep-alive.
		unheard := time.Duration(-1)
		for {
			sent := time.Since(start)
			if unheard >= 0 && time.Duration(heard.Load()) >= unheard {
				unheard = -1
			}
			if unheard >= 0 && sent-unheard > feedSilence {
				cancel() // the listener hears nothing: connect again
				return
			}
			// A sync point that fails to go just leaves the trust to
			// lapse; the next tick tries again.
			_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, syncChannel, strconv.FormatInt(int64(sent), 10))
			if unheard < 0 {
				unheard = sent
			}
			next := feedPing
			if demand != nil {
				if demand.TrustWanted() {
					read = time.Now()
				} else if time.Since(read) > feedQuiet {
					// On the node's grid (internal/tick): the
					// keep-alives of every watch, the heartbeat and
					// the sweep wake an idle node together.
					next = tick.Until(time.Now(), feedKeepAlive)
				}
			}
			t.Reset(next)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-wake:
				read = time.Now()
				t.Stop() // no stale tick is received after Stop (Go 1.23)
			}
		}
	}()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notifications: %w", err)
		}
		switch n.Channel {
		case syncChannel:
			sent, err := strconv.ParseInt(n.Payload, 10, 64)
			if err != nil || sent < heard.Load() {
				continue
			}
			heard.Store(sent)
			w.Current(start.Add(time.Duration(sent) + feedTrust))
		case changesChannel:
			// schema, organization and ID; neither the schema nor the
			// ID holds a space.
			sch, rest, ok := strings.Cut(n.Payload, " ")
			i := strings.LastIndexByte(rest, ' ')
			if !ok || i < 0 || sch != schema {
				continue
			}
			w.Changed(rest[:i], rest[i+1:])
		}
	}
}
