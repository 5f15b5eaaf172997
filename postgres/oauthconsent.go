package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

var _ toolplane.OAuthConsentStore = (*Store)(nil)

// clientSweepLock is the advisory lock key the sweep of unused clients
// takes exclusively and a consent's insert shared: the bytes of
// "oauthswp" read as a big-endian integer. The sweep decides which
// clients no grant names only once every consent being stored has
// committed, and no consent is stored while it deletes; consents do not
// wait for one another. Database-wide, like every advisory lock.
const clientSweepLock int64 = 0x6f61757468737770

// lockClient takes the transaction's advisory lock of the organization's
// client (two 32-bit keys, a space apart from the single-key locks), so
// that a consent's check and insert, and the client's revocation, come
// one after the other.
func lockClient(ctx context.Context, tx pgx.Tx, org, clientID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))`, org, clientID)
	return err
}

// InsertOAuthConsent stores g, c and e in one transaction while g's client
// is registered and not revoked by g's organization, or answers an error
// wrapping toolplane.ErrOAuthClientGone. The check reads after the locks
// are held (each statement reads what committed before it), so a
// revocation or sweep that committed first is seen, and one that comes
// later waits for this transaction and then finds its grant.
func (s *Store) InsertOAuthConsent(ctx context.Context, g *toolplane.OAuthGrant, c *toolplane.OAuthCode, e *toolplane.AuditEvent) error {
	roles, err := jsonNames("roles", g.Roles)
	if err != nil {
		return fmt.Errorf("insert oauth consent: %w: %v", toolplane.ErrInvalid, err)
	}
	tools, err := jsonNames("tools", g.Tools)
	if err != nil {
		return fmt.Errorf("insert oauth consent: %w: %v", toolplane.ErrInvalid, err)
	}
	gone := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, clientSweepLock); err != nil {
			return err
		}
		if err := lockClient(ctx, tx, g.OrganizationID, g.ClientID); err != nil {
			return err
		}
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oauth_clients WHERE id = $1)
			AND NOT EXISTS (SELECT 1 FROM oauth_client_settings WHERE organization_id = $2 AND client_id = $1 AND revoked_at IS NOT NULL)`,
			g.ClientID, g.OrganizationID).Scan(&ok); err != nil {
			return err
		}
		if gone = !ok; gone {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO oauth_grants (`+oauthGrantColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			g.OrganizationID, g.ID, g.ClientID, g.Subject, roles, g.AgentID, tools, g.Resource,
			micros(g.CreatedAt), micros(g.ExpiresAt), optMicros(g.RevokedAt), g.RevokedReason, g.PersonKey, micros(g.SignedInAt)); err != nil {
			return err
		}
		if err := insertCode(ctx, tx, c); err != nil {
			return err
		}
		return appendAuditTx(ctx, tx, e)
	})
	switch {
	case isDuplicate(err) || errors.Is(err, toolplane.ErrExists):
		return fmt.Errorf("insert oauth consent: %w", toolplane.ErrExists)
	case err != nil:
		return fmt.Errorf("insert oauth consent: %w", err)
	case gone:
		return fmt.Errorf("insert oauth consent to %s: %w", g.ClientID, toolplane.ErrOAuthClientGone)
	}
	return nil
}
