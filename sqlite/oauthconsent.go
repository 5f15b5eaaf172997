package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/toolplane/toolplane"
)

var _ toolplane.OAuthConsentStore = (*Store)(nil)

// InsertOAuthConsent stores g and c in one transaction while g's client
// is registered and not revoked by g's organization, or answers an error
// wrapping toolplane.ErrOAuthClientGone. The check is inside the write
// transaction, and the store has one writer: a client revocation or the
// sweep of unused clients commits wholly before or wholly after it.
func (s *Store) InsertOAuthConsent(ctx context.Context, g *toolplane.OAuthGrant, c *toolplane.OAuthCode) error {
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
// grants to the client in one transaction, and answers how many.
func (s *Store) RevokeOAuthClient(ctx context.Context, st *toolplane.OAuthClientSetting, reason string) (int, error) {
	if st.RevokedAt.IsZero() {
		return 0, fmt.Errorf("revoke oauth client: %w: the setting's revoked_at is not set", toolplane.ErrInvalid)
	}
	defer s.oauthChanged(st.OrganizationID, "")
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO oauth_client_settings (`+oauthSettingColumns+`) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (organization_id, client_id) DO UPDATE SET agent_id = excluded.agent_id, revoked_at = excluded.revoked_at,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
			st.OrganizationID, st.ClientID, st.AgentID, optMicros(st.RevokedAt), st.UpdatedBy, micros(st.UpdatedAt)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = ?, revoked_reason = ?
			WHERE organization_id = ? AND client_id = ? AND revoked_at IS NULL`, micros(st.RevokedAt), reason, st.OrganizationID, st.ClientID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("revoke oauth client: %w", err)
	}
	return int(n), nil
}
