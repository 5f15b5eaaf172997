package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
)

var _ toolplane.OAuthConsentStore = (*Store)(nil)

// InsertOAuthConsent stores g, c and e in one transaction while g's client
// is registered and not revoked by g's organization, or answers an error
// wrapping toolplane.ErrOAuthClientGone. The check is inside the write
// transaction, and the store has one writer: a client revocation or the
// sweep of unused clients commits wholly before or wholly after it.
func (s *Store) InsertOAuthConsent(ctx context.Context, g *toolplane.OAuthGrant, c *toolplane.OAuthCode, e *toolplane.AuditEvent) error {
	roles, err := names("roles", g.Roles)
	if err != nil {
		return fmt.Errorf("insert oauth consent: %w: %v", toolplane.ErrInvalid, err)
	}
	tools, err := names("tools", g.Tools)
	if err != nil {
		return fmt.Errorf("insert oauth consent: %w: %v", toolplane.ErrInvalid, err)
	}
	gone := false
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var ok bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM oauth_clients WHERE id = ?)
			AND NOT EXISTS (SELECT 1 FROM oauth_client_settings WHERE organization_id = ? AND client_id = ? AND revoked_at IS NOT NULL)`,
			g.ClientID, g.OrganizationID, g.ClientID).Scan(&ok); err != nil {
			return err
		}
		if gone = !ok; gone {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO oauth_grants (`+oauthGrantColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			g.OrganizationID, g.ID, g.ClientID, g.Subject, roles, g.AgentID, tools, g.Resource,
			micros(g.CreatedAt), micros(g.ExpiresAt), optMicros(g.RevokedAt), g.RevokedReason, g.PersonKey, micros(g.SignedInAt)); err != nil {
			return err
		}
		if err := insertCode(ctx, tx, c); err != nil {
			return err
		}
		return s.appendAuditTx(ctx, tx, e)
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
