package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

var _ toolplane.OAuthStore = (*Store)(nil)

// list answers a stored JSON list of names.
func list(text string) []string {
	var out []string
	if err := json.Unmarshal([]byte(text), &out); err != nil || len(out) == 0 {
		return nil
	}
	return out
}

const oauthClientColumns = `id, name, redirect_uris, source, created_at`

func scanOAuthClient(r scanner) (toolplane.OAuthClient, error) {
	var (
		c       toolplane.OAuthClient
		uris    string
		created int64
	)
	err := r.Scan(&c.ID, &c.Name, &uris, &c.Source, &created)
	c.RedirectURIs, c.CreatedAt = list(uris), fromMicros(created)
	return c, err
}

// InsertOAuthClient stores c, or answers an error wrapping
// toolplane.ErrExists; with max above zero, only while fewer than max
// clients are stored (toolplane.ErrOAuthClientsFull otherwise).
func (s *Store) InsertOAuthClient(ctx context.Context, c *toolplane.OAuthClient, max int) error {
	uris, err := names("redirect_uris", c.RedirectURIs)
	if err != nil {
		return fmt.Errorf("insert oauth client: %w: %v", toolplane.ErrInvalid, err)
	}
	var full, known bool
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		full, known = false, false
		if max > 0 {
			// A client stored already is ErrExists at the cap too: a
			// metadata document's client is inserted at each consent to it.
			var n, same int
			if err := tx.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE id = ?) FROM oauth_clients`, c.ID).Scan(&n, &same); err != nil {
				return err
			}
			if known, full = same > 0, n >= max; known || full {
				return nil
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_clients (`+oauthClientColumns+`) VALUES (?, ?, ?, ?, ?)`,
			c.ID, c.Name, uris, c.Source, micros(c.CreatedAt))
		return err
	})
	switch {
	case isDuplicate(err), err == nil && known:
		return fmt.Errorf("insert oauth client: %w", toolplane.ErrExists)
	case err != nil:
		return fmt.Errorf("insert oauth client: %w", err)
	case full:
		return fmt.Errorf("insert oauth client: %w", toolplane.ErrOAuthClientsFull)
	}
	return nil
}

// DeleteUnusedOAuthClients removes registered clients created before
// before that no grant and no setting names, at most limit.
func (s *Store) DeleteUnusedOAuthClients(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := s.exec(ctx, `DELETE FROM oauth_clients WHERE id IN (SELECT c.id FROM oauth_clients c
		WHERE c.source = ? AND c.created_at < ?
		AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.id)
		AND NOT EXISTS (SELECT 1 FROM oauth_client_settings st WHERE st.client_id = c.id)
		LIMIT ?)`, toolplane.OAuthClientRegistered, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete unused oauth clients: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete unused oauth clients: %w", err)
	}
	return int(n), nil
}

// GetOAuthClient answers the client, or an error wrapping
// toolplane.ErrNotFound.
func (s *Store) GetOAuthClient(ctx context.Context, id string) (*toolplane.OAuthClient, error) {
	c, err := scanOAuthClient(s.queryRow(ctx, `SELECT `+oauthClientColumns+` FROM oauth_clients WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get oauth client: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get oauth client: %w", err)
	}
	return &c, nil
}

// OAuthClients answers up to limit clients, newest first.
func (s *Store) OAuthClients(ctx context.Context, limit int) ([]toolplane.OAuthClient, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("oauth clients: %w", err)
	}
	rows, err := s.query(ctx, `SELECT `+oauthClientColumns+` FROM oauth_clients ORDER BY created_at DESC, id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("oauth clients: %w", err)
	}
	defer rows.Close()
	var out []toolplane.OAuthClient
	for rows.Next() {
		c, err := scanOAuthClient(rows)
		if err != nil {
			return nil, fmt.Errorf("oauth clients: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

const oauthSettingColumns = `organization_id, client_id, agent_id, revoked_at, updated_by, updated_at`

func scanOAuthSetting(r scanner) (toolplane.OAuthClientSetting, error) {
	var (
		c       toolplane.OAuthClientSetting
		revoked sql.NullInt64
		updated int64
	)
	err := r.Scan(&c.OrganizationID, &c.ClientID, &c.AgentID, &revoked, &c.UpdatedBy, &updated)
	c.RevokedAt, c.UpdatedAt = fromOptMicros(revoked), fromMicros(updated)
	return c, err
}

// PutOAuthClientSetting stores c, replacing the organization's setting
// of the client, and e (when not nil) with it in one write.
func (s *Store) PutOAuthClientSetting(ctx context.Context, c *toolplane.OAuthClientSetting, e *toolplane.AuditEvent) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := putSetting(ctx, tx, c); err != nil {
			return err
		}
		return s.appendAuditTx(ctx, tx, e)
	})
	if err != nil {
		return fmt.Errorf("put oauth client setting: %w", err)
	}
	return nil
}

func putSetting(ctx context.Context, tx *sql.Tx, c *toolplane.OAuthClientSetting) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO oauth_client_settings (`+oauthSettingColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (organization_id, client_id) DO UPDATE SET agent_id = excluded.agent_id, revoked_at = COALESCE(oauth_client_settings.revoked_at, excluded.revoked_at),
		updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
		c.OrganizationID, c.ClientID, c.AgentID, optMicros(c.RevokedAt), c.UpdatedBy, micros(c.UpdatedAt))
	return err
}

// GetOAuthClientSetting answers the organization's setting of the client,
// or an error wrapping toolplane.ErrNotFound.
func (s *Store) GetOAuthClientSetting(ctx context.Context, org, clientID string) (*toolplane.OAuthClientSetting, error) {
	c, err := scanOAuthSetting(s.queryRow(ctx, `SELECT `+oauthSettingColumns+` FROM oauth_client_settings
		WHERE organization_id = ? AND client_id = ?`, org, clientID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get oauth client setting: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get oauth client setting: %w", err)
	}
	return &c, nil
}

// OAuthClientSettings answers the organization's settings.
func (s *Store) OAuthClientSettings(ctx context.Context, org string) ([]toolplane.OAuthClientSetting, error) {
	rows, err := s.query(ctx, `SELECT `+oauthSettingColumns+` FROM oauth_client_settings WHERE organization_id = ? ORDER BY client_id LIMIT 1000`, org)
	if err != nil {
		return nil, fmt.Errorf("oauth client settings: %w", err)
	}
	defer rows.Close()
	var out []toolplane.OAuthClientSetting
	for rows.Next() {
		c, err := scanOAuthSetting(rows)
		if err != nil {
			return nil, fmt.Errorf("oauth client settings: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

const oauthGrantColumns = `organization_id, id, client_id, subject, roles, agent_id, tools, resource, created_at, expires_at, revoked_at, revoked_reason, person_key, signed_in_at`

func scanOAuthGrant(r scanner) (toolplane.OAuthGrant, error) {
	var (
		g                toolplane.OAuthGrant
		roles, tools     string
		created, expires int64
		revoked          sql.NullInt64
		signedIn         int64
	)
	err := r.Scan(&g.OrganizationID, &g.ID, &g.ClientID, &g.Subject, &roles, &g.AgentID, &tools, &g.Resource,
		&created, &expires, &revoked, &g.RevokedReason, &g.PersonKey, &signedIn)
	g.Roles, g.Tools = list(roles), list(tools)
	g.CreatedAt, g.ExpiresAt, g.RevokedAt, g.SignedInAt = fromMicros(created), fromMicros(expires), fromOptMicros(revoked), fromMicros(signedIn)
	return g, err
}

// InsertOAuthGrant stores g, or answers an error wrapping
// toolplane.ErrExists.
func (s *Store) InsertOAuthGrant(ctx context.Context, g *toolplane.OAuthGrant) error {
	return s.InsertOAuthGrantWithCode(ctx, g, nil, nil)
}

// InsertOAuthGrantWithCode stores g and, when c is not nil, its code, and
// e when not nil, in one transaction.
func (s *Store) InsertOAuthGrantWithCode(ctx context.Context, g *toolplane.OAuthGrant, c *toolplane.OAuthCode, e *toolplane.AuditEvent) error {
	roles, err := names("roles", g.Roles)
	if err != nil {
		return fmt.Errorf("insert oauth grant: %w: %v", toolplane.ErrInvalid, err)
	}
	tools, err := names("tools", g.Tools)
	if err != nil {
		return fmt.Errorf("insert oauth grant: %w: %v", toolplane.ErrInvalid, err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO oauth_grants (`+oauthGrantColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			g.OrganizationID, g.ID, g.ClientID, g.Subject, roles, g.AgentID, tools, g.Resource,
			micros(g.CreatedAt), micros(g.ExpiresAt), optMicros(g.RevokedAt), g.RevokedReason, g.PersonKey, micros(g.SignedInAt)); err != nil {
			return err
		}
		if c != nil {
			if err := insertCode(ctx, tx, c); err != nil {
				return err
			}
		}
		return s.appendAuditTx(ctx, tx, e)
	})
	if isDuplicate(err) || errors.Is(err, toolplane.ErrExists) {
		return fmt.Errorf("insert oauth grant: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert oauth grant: %w", err)
	}
	return nil
}

// GetOAuthGrant answers the organization's grant, or an error wrapping
// toolplane.ErrNotFound.
func (s *Store) GetOAuthGrant(ctx context.Context, org, id string) (*toolplane.OAuthGrant, error) {
	g, err := scanOAuthGrant(s.queryRow(ctx, `SELECT `+oauthGrantColumns+` FROM oauth_grants WHERE organization_id = ? AND id = ?`, org, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get oauth grant: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get oauth grant: %w", err)
	}
	return &g, nil
}

// OAuthGrants answers the organization's grants of subject (everyone's
// when empty), newest first.
func (s *Store) OAuthGrants(ctx context.Context, org, subject string) ([]toolplane.OAuthGrant, error) {
	rows, err := s.query(ctx, `SELECT `+oauthGrantColumns+` FROM oauth_grants WHERE organization_id = ? AND (? = '' OR subject = ?)
		ORDER BY created_at DESC, id LIMIT 1000`, org, subject, subject)
	if err != nil {
		return nil, fmt.Errorf("oauth grants: %w", err)
	}
	defer rows.Close()
	var out []toolplane.OAuthGrant
	for rows.Next() {
		g, err := scanOAuthGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("oauth grants: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// RevokeOAuthGrant revokes a standing grant, and stores e (when not nil)
// with the revocation in one write.
func (s *Store) RevokeOAuthGrant(ctx context.Context, org, id, reason string, at time.Time, e *toolplane.AuditEvent) (bool, error) {
	defer s.oauthChanged(org, id)
	var ok bool
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = ?, revoked_reason = ?
			WHERE organization_id = ? AND id = ? AND revoked_at IS NULL`, micros(at), reason, org, id)
		if err != nil {
			return err
		}
		if ok, err = affected(res); err != nil || !ok {
			return err
		}
		return s.appendAuditTx(ctx, tx, e)
	})
	if err != nil {
		return false, fmt.Errorf("revoke oauth grant: %w", err)
	}
	return ok, nil
}

// RevokeOAuthClient stores the client's revocation c, revokes every
// standing grant of the organization to the client, and stores e (when
// not nil, its Reason the count), in one write.
func (s *Store) RevokeOAuthClient(ctx context.Context, c *toolplane.OAuthClientSetting, reason string, e *toolplane.AuditEvent) (int, error) {
	if c.RevokedAt.IsZero() {
		return 0, fmt.Errorf("revoke oauth client: %w: the setting's revoked_at is not set", toolplane.ErrInvalid)
	}
	defer s.oauthChanged(c.OrganizationID, "")
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := putSetting(ctx, tx, c); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE oauth_grants SET revoked_at = ?, revoked_reason = ?
			WHERE organization_id = ? AND client_id = ? AND revoked_at IS NULL`, micros(c.UpdatedAt), reason, c.OrganizationID, c.ClientID)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		if e != nil {
			e.Reason = fmt.Sprintf("%d consents revoked", n)
		}
		return s.appendAuditTx(ctx, tx, e)
	})
	if err != nil {
		return 0, fmt.Errorf("revoke oauth client %s: %w", c.ClientID, err)
	}
	return int(n), nil
}

const oauthCodeColumns = `hash, organization_id, grant_id, client_id, redirect_uri, challenge, expires_at, used_at`

func scanOAuthCode(r scanner) (toolplane.OAuthCode, error) {
	var (
		c       toolplane.OAuthCode
		expires int64
		used    sql.NullInt64
	)
	err := r.Scan(&c.Hash, &c.OrganizationID, &c.GrantID, &c.ClientID, &c.RedirectURI, &c.Challenge, &expires, &used)
	c.ExpiresAt, c.UsedAt = fromMicros(expires), fromOptMicros(used)
	return c, err
}

// InsertOAuthCode stores c, or answers an error wrapping
// toolplane.ErrExists.
func (s *Store) InsertOAuthCode(ctx context.Context, c *toolplane.OAuthCode) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return insertCode(ctx, tx, c) })
	if isDuplicate(err) {
		return fmt.Errorf("insert oauth code: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert oauth code: %w", err)
	}
	return nil
}

func insertCode(ctx context.Context, tx *sql.Tx, c *toolplane.OAuthCode) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO oauth_codes (`+oauthCodeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		c.Hash, c.OrganizationID, c.GrantID, c.ClientID, c.RedirectURI, c.Challenge, micros(c.ExpiresAt), optMicros(c.UsedAt))
	return err
}

// TakeOAuthCode marks the code used and answers it; a second take answers
// it with toolplane.ErrReused.
func (s *Store) TakeOAuthCode(ctx context.Context, hash string, now time.Time) (*toolplane.OAuthCode, error) {
	var (
		c     toolplane.OAuthCode
		taken bool
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		c, err = scanOAuthCode(tx.QueryRowContext(ctx, `SELECT `+oauthCodeColumns+` FROM oauth_codes WHERE hash = ?`, hash))
		if err != nil {
			return err
		}
		if taken = c.UsedAt.IsZero(); !taken {
			return nil
		}
		c.UsedAt = now
		_, err = tx.ExecContext(ctx, `UPDATE oauth_codes SET used_at = ? WHERE hash = ?`, micros(now), hash)
		return err
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("take oauth code: %w", toolplane.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("take oauth code: %w", err)
	case !taken:
		return &c, fmt.Errorf("take oauth code: %w", toolplane.ErrReused)
	}
	c.UsedAt = fromMicros(micros(now))
	return &c, nil
}

const oauthRefreshColumns = `hash, organization_id, grant_id, created_at, expires_at, used_at`

func scanOAuthRefresh(r scanner) (toolplane.OAuthRefreshToken, error) {
	var (
		t                toolplane.OAuthRefreshToken
		created, expires int64
		used             sql.NullInt64
	)
	err := r.Scan(&t.Hash, &t.OrganizationID, &t.GrantID, &created, &expires, &used)
	t.CreatedAt, t.ExpiresAt, t.UsedAt = fromMicros(created), fromMicros(expires), fromOptMicros(used)
	return t, err
}

// InsertOAuthRefreshToken stores t, or answers an error wrapping
// toolplane.ErrExists.
func (s *Store) InsertOAuthRefreshToken(ctx context.Context, t *toolplane.OAuthRefreshToken) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return insertRefresh(ctx, tx, t) })
}

func insertRefresh(ctx context.Context, tx *sql.Tx, t *toolplane.OAuthRefreshToken) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO oauth_refresh_tokens (`+oauthRefreshColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		t.Hash, t.OrganizationID, t.GrantID, micros(t.CreatedAt), micros(t.ExpiresAt), optMicros(t.UsedAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert oauth refresh token: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert oauth refresh token: %w", err)
	}
	return nil
}

// GetOAuthRefreshToken answers the token, or an error wrapping
// toolplane.ErrNotFound.
func (s *Store) GetOAuthRefreshToken(ctx context.Context, hash string) (*toolplane.OAuthRefreshToken, error) {
	t, err := scanOAuthRefresh(s.queryRow(ctx, `SELECT `+oauthRefreshColumns+` FROM oauth_refresh_tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get oauth refresh token: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get oauth refresh token: %w", err)
	}
	return &t, nil
}

// RotateOAuthRefreshToken marks the token used and stores next in one
// transaction; a token used already answers toolplane.ErrReused.
func (s *Store) RotateOAuthRefreshToken(ctx context.Context, hash string, next *toolplane.OAuthRefreshToken, now time.Time) (*toolplane.OAuthRefreshToken, error) {
	var (
		t     toolplane.OAuthRefreshToken
		fresh bool
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		t, err = scanOAuthRefresh(tx.QueryRowContext(ctx, `SELECT `+oauthRefreshColumns+` FROM oauth_refresh_tokens WHERE hash = ?`, hash))
		if err != nil {
			return err
		}
		if fresh = t.UsedAt.IsZero(); !fresh {
			return nil
		}
		if _, err = tx.ExecContext(ctx, `UPDATE oauth_refresh_tokens SET used_at = ? WHERE hash = ?`, micros(now), hash); err != nil {
			return err
		}
		return insertRefresh(ctx, tx, next)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("rotate oauth refresh token: %w", toolplane.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("rotate oauth refresh token: %w", err)
	case !fresh:
		return &t, fmt.Errorf("rotate oauth refresh token: %w", toolplane.ErrReused)
	}
	t.UsedAt = fromMicros(micros(now))
	return &t, nil
}

// InsertOAuthSigningKey stores k, or answers an error wrapping
// toolplane.ErrExists.
func (s *Store) InsertOAuthSigningKey(ctx context.Context, k *toolplane.OAuthSigningKey) error {
	_, err := s.exec(ctx, `INSERT INTO oauth_signing_keys (id, sealed, public, created_at, retired_at) VALUES (?, ?, ?, ?, ?)`,
		k.ID, k.Sealed, k.Public, micros(k.CreatedAt), optMicros(k.RetiredAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert oauth signing key: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert oauth signing key: %w", err)
	}
	return nil
}

// OAuthSigningKeys answers every key not retired, newest first.
func (s *Store) OAuthSigningKeys(ctx context.Context) ([]toolplane.OAuthSigningKey, error) {
	rows, err := s.query(ctx, `SELECT id, sealed, public, created_at, retired_at FROM oauth_signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("oauth signing keys: %w", err)
	}
	defer rows.Close()
	var out []toolplane.OAuthSigningKey
	for rows.Next() {
		var (
			k       toolplane.OAuthSigningKey
			created int64
			retired sql.NullInt64
		)
		if err := rows.Scan(&k.ID, &k.Sealed, &k.Public, &created, &retired); err != nil {
			return nil, fmt.Errorf("oauth signing keys: %w", err)
		}
		k.CreatedAt, k.RetiredAt = fromMicros(created), fromOptMicros(retired)
		out = append(out, k)
	}
	return out, rows.Err()
}

// RetireOAuthSigningKey retires the key.
func (s *Store) RetireOAuthSigningKey(ctx context.Context, id string, at time.Time) (bool, error) {
	res, err := s.exec(ctx, `UPDATE oauth_signing_keys SET retired_at = ? WHERE id = ? AND retired_at IS NULL`, micros(at), id)
	if err != nil {
		return false, fmt.Errorf("retire oauth signing key: %w", err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("retire oauth signing key: %w", err)
	}
	return ok, nil
}

// DeleteOAuthExpired removes codes and refresh tokens expired before
// before, at most limit of each.
func (s *Store) DeleteOAuthExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	for _, table := range []string{"oauth_codes", "oauth_refresh_tokens"} {
		res, err := s.exec(ctx, `DELETE FROM `+table+` WHERE hash IN (SELECT hash FROM `+table+` WHERE expires_at < ? LIMIT ?)`, micros(before), limit)
		if err != nil {
			return int(n), fmt.Errorf("delete expired %s: %w", table, err)
		}
		m, err := res.RowsAffected()
		if err != nil {
			return int(n), fmt.Errorf("delete expired %s: %w", table, err)
		}
		n += m
	}
	return int(n), nil
}
