package postgres

import (
	"context"
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

// InsertOAuthConsent stores g and c in one transaction while g's client
// is registered and not revoked by g's organization, or answers an error
// wrapping toolplane.ErrOAuthClientGone. The check reads after the locks
// are held (each statement reads what committed before it), so a
// revocation or sweep that committed first is seen, and one that comes
// later waits for this transaction and then finds its grant.
func (s *Store) InsertOAuthConsent(ctx context.Context, g *toolplane.OAuthGrant, c *toolplane.OAuthCode) error {
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
		return insertCode(ctx, tx, c)
	})
	switch {
	case isDuplicate(err):
		return fmt.Errorf("insert oauth consent: %w", toolplane.ErrExists)
	case err != nil:
		return fmt.Errorf("insert oauth consent: %w", err)
	case gone:
		return fmt.Errorf("insert oauth consent to %s: %w", g.ClientID, toolplane.ErrOAuthClientGone)
	}
	return nil
}

// RevokeOAuthClient stores the organization's setting st and revokes its
// grants to the client in one transaction, under the client's lock that
// a consent's insert takes, and answers how many grants it revoked.
func (s *Store) RevokeOAuthClient(ctx context.Context, st *toolplane.OAuthClientSetting, reason string) (int, error) {
	if st.RevokedAt.IsZero() {
		return 0, fmt.Errorf("revoke oauth client: %w: the setting's revoked_at is not set", toolplane.ErrInvalid)
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockClient(ctx, tx, st.OrganizationID, st.ClientID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO oauth_client_settings (`+oauthSettingColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (organization_id, client_id) DO UPDATE SET agent_id = excluded.agent_id, revoked_at = excluded.revoked_at,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
			st.OrganizationID, st.ClientID, st.AgentID, optMicros(st.RevokedAt), st.UpdatedBy, micros(st.UpdatedAt)); err != nil {
			return err
		}
		res, err := tx.Exec(ctx, `UPDATE oauth_grants SET revoked_at = $1, revoked_reason = $2
			WHERE organization_id = $3 AND client_id = $4 AND revoked_at IS NULL`, micros(st.RevokedAt), reason, st.OrganizationID, st.ClientID)
		n = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("revoke oauth client: %w", err)
	}
	return int(n), nil
}
