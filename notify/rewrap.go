package notify

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// RewrapStore is what RewrapChannels needs of a store.
type RewrapStore interface {
	ChannelsAfter(ctx context.Context, afterOrg, afterID string, limit int) ([]toolplane.NotificationChannel, error)
	ReplaceChannelSecret(ctx context.Context, org, id string, prev, next []byte) (bool, error)
}

// RewrapReport counts what RewrapChannels did.
type RewrapReport struct {
	// Rewrapped channels had their data key wrapped again under the
	// current key; Current ones were under it already; Empty ones hold
	// no secret.
	Rewrapped, Current, Empty int
	// Failed channels could not be rewrapped (a secret that does not
	// open, or changed meanwhile); each is logged by organization and ID.
	Failed int
}

// RewrapChannels wraps every channel's data key under keys' current key,
// across every organization, as secret.RewrapAll does for connections: the
// second step of rotating the key-encryption key. A channel whose secret
// changed meanwhile was sealed under the current key by whoever changed it,
// and is counted failed only when it still is not. The answer wraps
// secret.ErrIncomplete when some channel is left under an old key.
func RewrapChannels(ctx context.Context, store RewrapStore, keys *secret.Keyring, log *slog.Logger) (RewrapReport, error) {
	var r RewrapReport
	org, id := "", ""
	for {
		cs, err := store.ChannelsAfter(ctx, org, id, 100)
		if err != nil {
			return r, fmt.Errorf("rewrap channels: %w", err)
		}
		for i := range cs {
			c := &cs[i]
			if len(c.Secret) == 0 {
				r.Empty++
				continue
			}
			next, changed, err := keys.Rewrap(c.Secret, channelAAD(c.OrganizationID, c.ID))
			switch {
			case err != nil:
				r.Failed++
				log.WarnContext(ctx, "channel secret not rewrapped", "organization", c.OrganizationID, "channel", c.ID, "err", err)
			case !changed:
				r.Current++
			default:
				ok, err := store.ReplaceChannelSecret(ctx, c.OrganizationID, c.ID, c.Secret, next)
				if err != nil {
					return r, fmt.Errorf("rewrap channel %s: %w", c.ID, err)
				}
				if ok {
					r.Rewrapped++
				} else {
					r.Failed++
					log.WarnContext(ctx, "channel changed while rewrapping; run again", "organization", c.OrganizationID, "channel", c.ID)
				}
			}
		}
		if len(cs) < 100 {
			break
		}
		org, id = cs[len(cs)-1].OrganizationID, cs[len(cs)-1].ID
	}
	if r.Failed > 0 {
		return r, fmt.Errorf("%w: %d notification channels", secret.ErrIncomplete, r.Failed)
	}
	return r, nil
}
