package signing

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// RewrapReport counts what Rewrap did.
type RewrapReport struct {
	// Rewrapped organizations had a data key wrapped again under the
	// current key; Current ones were under it already.
	Rewrapped, Current int
	// Failed organizations could not be rewrapped (a secret that does
	// not open, or one rotated meanwhile); each is logged by
	// organization.
	Failed int
}

// Rewrap wraps the data keys of every organization's callback signing
// secrets under keys' current key, as secret.RewrapAll does for
// connections: a step of rotating the key-encryption key. Each write is
// conditional on the version read, so a rotation meanwhile is never
// overwritten (it sealed under the current key itself). The answer wraps
// secret.ErrIncomplete when an organization is left under an old key.
func Rewrap(ctx context.Context, store toolplane.WebhookSecretStore, keys *secret.Keyring, log *slog.Logger) (RewrapReport, error) {
	var r RewrapReport
	after := ""
	for {
		ws, err := store.WebhookSecretsAfter(ctx, after, 100)
		if err != nil {
			return r, fmt.Errorf("rewrap callback signing secrets: %w", err)
		}
		for i := range ws {
			w := &ws[i]
			cur, c1, err1 := keys.Rewrap(w.Current, aad(w.OrganizationID, w.CurrentID))
			prev, c2, err2 := w.Previous, false, error(nil)
			if len(w.Previous) > 0 {
				prev, c2, err2 = keys.Rewrap(w.Previous, aad(w.OrganizationID, w.PreviousID))
			}
			switch {
			case err1 != nil || err2 != nil:
				r.Failed++
				log.WarnContext(ctx, "callback signing secret not rewrapped", "organization", w.OrganizationID, "err", firstErr(err1, err2))
			case !c1 && !c2:
				r.Current++
			default:
				w.Current, w.Previous = cur, prev
				ok, err := store.UpdateWebhookSecret(ctx, w)
				if err != nil {
					return r, fmt.Errorf("rewrap the callback signing secret of %s: %w", w.OrganizationID, err)
				}
				if ok {
					r.Rewrapped++
				} else {
					r.Failed++
					log.WarnContext(ctx, "callback signing secret rotated while rewrapping; run again", "organization", w.OrganizationID)
				}
			}
		}
		if len(ws) < 100 {
			break
		}
		after = ws[len(ws)-1].OrganizationID
	}
	if r.Failed > 0 {
		return r, fmt.Errorf("%w: %d callback signing secrets", secret.ErrIncomplete, r.Failed)
	}
	return r, nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
