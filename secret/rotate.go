package secret

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/toolplane/toolplane"
)

// RewrapStore is what RewrapAll needs of a store: the operator's walk over
// every organization's connections, and the compare-and-swap update (see
// toolplane.ConnectionStore).
type RewrapStore interface {
	ListAllConnections(ctx context.Context, after string, limit int) ([]toolplane.Connection, string, error)
	GetConnection(ctx context.Context, org, id string) (*toolplane.Connection, error)
	UpdateConnection(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) (bool, error)
}

// Report counts what RewrapAll did.
type Report struct {
	// Rewrapped connections had their data key wrapped again under the
	// current key.
	Rewrapped int
	// Current connections were under the current key already.
	Current int
	// Empty connections hold no secret (an authorization not completed),
	// and Gone ones were deleted while the walk ran.
	Empty, Gone int
	// Failed connections could not be rewrapped: their secret does not
	// authenticate, names a key the ring lacks, or kept changing. Each is
	// logged by organization and ID.
	Failed int
}

// ErrIncomplete: RewrapAll left connections under an old key. The old
// key must stay in every node's ring until they are rewrapped.
var ErrIncomplete = errors.New("rewrap incomplete: some connections are not under the current key")

// pageSize is how many connections RewrapAll reads at once.
const pageSize = 100

// maxRaces bounds the compare-and-swap retries on one connection; each
// retry means another node changed it meanwhile, and a handful always
// suffices in practice.
const maxRaces = 8

// RewrapAll wraps every stored connection's data key under k's current
// key, page by page across every organization, and counts what it did.
// It is safe while nodes serve and update connections: each write is
// conditional on the version read, and one lost to a concurrent update
// reads the connection again and rewraps what it holds now (a node that
// sealed a new secret under the current key leaves nothing to do).
//
// A connection that fails is logged and counted and the walk goes on; the
// answer then wraps ErrIncomplete, and running it again after the cause is
// fixed finishes the work. A store that cannot be read, or ctx ending,
// stops the walk with the report so far. Rewrapping touches nothing but
// Secret and Version: the secret's meaning did not change, so no change
// is recorded and UpdatedAt stays.
func RewrapAll(ctx context.Context, store RewrapStore, k *Keyring, log *slog.Logger) (Report, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var r Report
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		page, next, err := store.ListAllConnections(ctx, after, pageSize)
		if err != nil {
			return r, fmt.Errorf("rewrap: list connections after %q: %w", after, err)
		}
		for i := range page {
			if err := rewrapOne(ctx, store, k, &page[i], &r, log); err != nil {
				return r, err
			}
		}
		if next == "" || len(page) == 0 {
			break
		}
		after = next
	}
	log.InfoContext(ctx, "connection secrets rewrapped", "key", k.Current(), "rewrapped", r.Rewrapped,
		"current", r.Current, "empty", r.Empty, "gone", r.Gone, "failed", r.Failed)
	if r.Failed > 0 {
		return r, fmt.Errorf("%w: %d failed (see the log); keep the old key", ErrIncomplete, r.Failed)
	}
	return r, nil
}

// rewrapOne rewraps one connection, retrying on lost compare-and-swaps.
// Its error stops the walk (ctx ended); a connection's own failure is
// counted instead.
func rewrapOne(ctx context.Context, store RewrapStore, k *Keyring, c *toolplane.Connection, r *Report, log *slog.Logger) error {
	org, id := c.OrganizationID, c.ID
	fail := func(msg string, err error) {
		r.Failed++
		log.ErrorContext(ctx, msg, "organization", org, "connection", id, "err", err)
	}
	for race := 0; ; race++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(c.Secret) == 0 {
			r.Empty++
			return nil
		}
		out, changed, err := k.Rewrap(c.Secret, ConnectionAAD(org, id))
		if err != nil {
			fail("connection secret not rewrapped", err)
			return nil
		}
		if !changed {
			r.Current++
			return nil
		}
		c.Secret = out
		ok, err := store.UpdateConnection(ctx, c, nil)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fail("connection secret not rewrapped: update", err)
			return nil
		}
		if ok {
			r.Rewrapped++
			return nil
		}
		if race == maxRaces {
			fail("connection secret not rewrapped: it kept changing", errors.New("too many concurrent updates"))
			return nil
		}
		fresh, err := store.GetConnection(ctx, org, id)
		if errors.Is(err, toolplane.ErrNotFound) {
			r.Gone++
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fail("connection secret not rewrapped: read again", err)
			return nil
		}
		c = fresh
	}
}
