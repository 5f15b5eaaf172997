package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/tick"
)

// MaxNodeName is the longest node name Register takes. The instance id it
// makes (the name, "@", Unix seconds, "-", 12 hex digits: 24 bytes more)
// names the node's River client, which River takes up to 100 bytes; a
// River client named otherwise cannot be told dead by its heartbeat, and
// its jobs would wait for River's rescuer.
const MaxNodeName = 76

// ErrNodeName answers a node name Register cannot take.
var ErrNodeName = errors.New("node name too long")

// Register records a new instance of the node named name, started at now,
// and retires the node's earlier instances: a node that restarts knows its
// earlier self is gone, so the claims it held are decided at once (see
// Runner.SettleLost) instead of after a heartbeat timeout. The name must
// be unique in the deployment: a second live process under it would see
// its claims decided as a dead node's (no effect is ever doubled by that,
// but its calls in flight end uncertain or refused).
func Register(ctx context.Context, nodes toolplane.NodeStore, name string, now time.Time) (*toolplane.Node, error) {
	if len(name) > MaxNodeName {
		return nil, fmt.Errorf("register node %.20q…: %w (%d bytes; at most %d)", name, ErrNodeName, len(name), MaxNodeName)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	n := &toolplane.Node{ID: fmt.Sprintf("%s@%d-%s", name, now.Unix(), hex.EncodeToString(b[:])), Name: name, StartedAt: now, HeartbeatAt: now}
	if err := nodes.InsertNode(ctx, n); err != nil {
		return nil, fmt.Errorf("register node %s: %w", name, err)
	}
	if _, err := nodes.RetireNodes(ctx, name, n.ID); err != nil {
		return nil, fmt.Errorf("register node %s: %w", name, err)
	}
	return n, nil
}

// Heartbeat says n is alive every period until ctx ends. A heartbeat that
// fails is logged and tried again at the next period: a node that cannot
// reach its database for longer than the deployment's dead-after is
// counted dead, and its claims are decided (safely: a claim taken over
// can no longer be written by its old holder).
func Heartbeat(ctx context.Context, nodes toolplane.NodeStore, n *toolplane.Node, every time.Duration, now func() time.Time, log *slog.Logger) {
	if now == nil {
		now = time.Now
	}
	// On the node's grid (internal/tick): an idle node's other loops
	// wake with its heartbeat.
	t := tick.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		t.Next()
		beat := *n
		beat.HeartbeatAt = now()
		if err := nodes.Heartbeat(ctx, &beat); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "node heartbeat failed", "node", n.ID, "err", err)
		}
	}
}

// SettleLost decides now, once, every claim whose worker was lost: leases
// ended, and (with Options.DeadAfter) claims of nodes known dead,
// including the earlier instances Register retired; and it makes the jobs
// those nodes were running available again. A node runs it at start,
// before it serves, so a restarted node's undispatched claims are
// released before its callers retry them, and the work its earlier
// instance had started (an approved call, a notification) runs again as
// soon as it works jobs.
func (r *Runner[TTx]) SettleLost(ctx context.Context) error {
	return r.w.sweepLeases(ctx)
}
