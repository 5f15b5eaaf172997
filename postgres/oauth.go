package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolplane/toolplane"
)

var _ toolplane.OAuthStore = (*Store)(nil)

// jsonNames answers a list of names as its text column keeps it: JSON.
func jsonNames(field string, l []string) (string, error) {
	checked, err := names(field, l)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(checked)
	return string(b), err
}

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

// clientCapLock is the advisory lock key a capped client insert takes
// before it counts: the bytes of "oauthcli" read as a big-endian integer.
// Held for the transaction, it keeps nodes registering at once from each
// counting room for one more client and passing the cap together. Like
// every advisory lock it is database-wide: schemas of one database share
// it, which costs a wait, never a wrong answer.
const clientCapLock int64 = 0x6f61757468636c69

// InsertOAuthClient stores c, or answers an error wrapping
// toolplane.ErrExists; with max above zero, only while fewer than max
// clients are stored (toolplane.ErrOAuthClientsFull otherwise).
func (s *Store) InsertOAuthClient(ctx context.Context, c *toolplane.OAuthClient, max int) error {
	uris, err := jsonNames("redirect_uris", c.RedirectURIs)
	if err != nil {
		return fmt.Errorf("insert oauth client: %w: %v", toolplane.ErrInvalid, err)
	}
	insert := `INSERT INTO oauth_clients (` + oauthClientColumns + `) VALUES ($1, $2, $3, $4, $5)`
	var full, known bool
	if max <= 0 {
		_, err = s.pool.Exec(ctx, insert, c.ID, c.Name, uris, c.Source, micros(c.CreatedAt))
	} else {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, clientCapLock); err != nil {
				return err
			}
			// A client stored already is ErrExists at the cap too: a
			// metadata document's client is inserted at each consent to it.
			var n, same int
			if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE id = $1) FROM oauth_clients`, c.ID).Scan(&n, &same); err != nil {
				return err
			}
			if known, full = same > 0, n >= max; known || full {
				return nil
			}
			_, err := tx.Exec(ctx, insert, c.ID, c.Name, uris, c.Source, micros(c.CreatedAt))
			return err
		})
	}
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
// before that no grant and no setting names, at most limit. It holds the
// sweep's lock (clientSweepLock) exclusively, so it reads the grants after
// every consent being stored committed, and no consent is stored while
// it deletes.
func (s *Store) DeleteUnusedOAuthClients(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, clientSweepLock); err != nil {
			return err
		}
		res, err := tx.Exec(ctx, `DELETE FROM oauth_clients WHERE id IN (SELECT c.id FROM oauth_clients c
			WHERE c.source = $1 AND c.created_at < $2
			AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = c.id)
			AND NOT EXISTS (SELECT 1 FROM oauth_client_settings st WHERE st.client_id = c.id)
			LIMIT $3)`, toolplane.OAuthClientRegistered, micros(before), limit)
		n = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete unused oauth clients: %w", err)
	}
	return int(n), nil
}

// GetOAuthClient answers the client, or an error wrapping
// toolplane.ErrNotFound.
func (s *Store) GetOAuthClient(ctx context.Context, id string) (*toolplane.OAuthClient, error) {
	c, err := scanOAuthClient(s.pool.QueryRow(ctx, `SELECT `+oauthClientColumns+` FROM oauth_clients WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
	rows, err := s.pool.Query(ctx, `SELECT `+oauthClientColumns+` FROM oauth_clients ORDER BY created_at DESC, id LIMIT $1`, limit)
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
		revoked *int64
		updated int64
	)
	err := r.Scan(&c.OrganizationID, &c.ClientID, &c.AgentID, &revoked, &c.UpdatedBy, &updated)
	c.RevokedAt, c.UpdatedAt = fromOptMicros(revoked), fromMicros(updated)
	return c, err
}

// PutOAuthClientSetting stores c, replacing the organization's setting
// of the client, and e (when not nil) with it in one statement.
func (s *Store) PutOAuthClientSetting(ctx context.Context, c *toolplane.OAuthClientSetting, e *toolplane.AuditEvent) error {
	var err error
	if e == nil {
		_, err = s.pool.Exec(ctx, putOAuthSetting, settingArgs(c)...)
	} else {
		_, err = s.execAudited(ctx, putOAuthSettingAudited, settingArgs(c), nil, e)
	}
	if err != nil {
		return fmt.Errorf("put oauth client setting: %w", err)
	}
	return nil
}

const putOAuthSetting = `INSERT INTO oauth_client_settings (` + oauthSettingColumns + `) VALUES ($1, $2, $3, $4, $5, $6)
	ON CONFLICT (organization_id, client_id) DO UPDATE SET agent_id = excluded.agent_id, revoked_at = COALESCE(oauth_client_settings.revoked_at, excluded.revoked_at),
	updated_by = excluded.updated_by, updated_at = excluded.updated_at`

// putOAuthSettingAudited is putOAuthSetting and the event's insert as one
// statement: the upsert always writes its row, so the event always
// follows it.
var putOAuthSettingAudited = audited(putOAuthSetting, 6, false)

func settingArgs(c *toolplane.OAuthClientSetting) []any {
	return []any{c.OrganizationID, c.ClientID, c.AgentID, optMicros(c.RevokedAt), c.UpdatedBy, micros(c.UpdatedAt)}
}

// GetOAuthClientSetting answers the organization's setting of the client,
// or an error wrapping toolplane.ErrNotFound.
func (s *Store) GetOAuthClientSetting(ctx context.Context, org, clientID string) (*toolplane.OAuthClientSetting, error) {
	c, err := scanOAuthSetting(s.pool.QueryRow(ctx, `SELECT `+oauthSettingColumns+` FROM oauth_client_settings
		WHERE organization_id = $1 AND client_id = $2`, org, clientID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get oauth client setting: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get oauth client setting: %w", err)
	}
	return &c, nil
}

// OAuthClientSettings answers the organization's settings.
func (s *Store) OAuthClientSettings(ctx context.Context, org string) ([]toolplane.OAuthClientSetting, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+oauthSettingColumns+` FROM oauth_client_settings WHERE organization_id = $1 ORDER BY client_id LIMIT 1000`, org)
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
		revoked          *int64
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
	roles, err := jsonNames("roles", g.Roles)
	if err != nil {
		return fmt.Errorf("insert oauth grant: %w: %v", toolplane.ErrInvalid, err)
	}
	tools, err := jsonNames("tools", g.Tools)
	if err != nil {
		return fmt.Errorf("insert oauth grant: %w: %v", toolplane.ErrInvalid, err)
	}
	insert := `INSERT INTO oauth_grants (` + oauthGrantColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`
	args := []any{g.OrganizationID, g.ID, g.ClientID, g.Subject, roles, g.AgentID, tools, g.Resource,
		micros(g.CreatedAt), micros(g.ExpiresAt), optMicros(g.RevokedAt), g.RevokedReason, g.PersonKey, micros(g.SignedInAt)}
	if c == nil && e == nil {
		_, err = s.pool.Exec(ctx, insert, args...)
	} else {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, insert, args...); err != nil {
				return err
			}
			if c != nil {
				if err := insertCode(ctx, tx, c); err != nil {
					return err
				}
			}
			return appendAuditTx(ctx, tx, e)
		})
	}
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
	g, err := scanOAuthGrant(s.pool.QueryRow(ctx, `SELECT `+oauthGrantColumns+` FROM oauth_grants WHERE organization_id = $1 AND id = $2`, org, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
	rows, err := s.pool.Query(ctx, `SELECT `+oauthGrantColumns+` FROM oauth_grants WHERE organization_id = $1 AND ($2 = '' OR subject = $3)
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
// with the revocation in one statement.
func (s *Store) RevokeOAuthGrant(ctx context.Context, org, id, reason string, at time.Time, e *toolplane.AuditEvent) (bool, error) {
	args := []any{micros(at), reason, org, id}
	if e != nil {
		ok, err := s.execAudited(ctx, revokeOAuthGrantAudited, args, nil, e)
		if err != nil {
			return false, fmt.Errorf("revoke oauth grant: %w", err)
		}
		return ok, nil
	}
	res, err := s.pool.Exec(ctx, revokeOAuthGrant, args...)
	if err != nil {
		return false, fmt.Errorf("revoke oauth grant: %w", err)
	}
	return res.RowsAffected() == 1, nil
}

const revokeOAuthGrant = `UPDATE oauth_grants SET revoked_at = $1, revoked_reason = $2
	WHERE organization_id = $3 AND id = $4 AND revoked_at IS NULL`

// revokeOAuthGrantAudited is revokeOAuthGrant and the event's insert as
// one statement: the event only when the grant was standing.
var revokeOAuthGrantAudited = audited(revokeOAuthGrant, 4, false)

// RevokeOAuthClient stores the client's revocation c, revokes every
// standing grant of the organization to the client, and stores e (when
// not nil, its Reason the count), in one transaction, under the client's
// lock (lockClient) that a consent's insert takes too.
func (s *Store) RevokeOAuthClient(ctx context.Context, c *toolplane.OAuthClientSetting, reason string, e *toolplane.AuditEvent) (int, error) {
	if c.RevokedAt.IsZero() {
		return 0, fmt.Errorf("revoke oauth client: %w: the setting's revoked_at is not set", toolplane.ErrInvalid)
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Under the client's lock a consent's insert takes: a consent
		// checked before and stored after this revocation cannot be.
		if err := lockClient(ctx, tx, c.OrganizationID, c.ClientID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, putOAuthSetting, settingArgs(c)...); err != nil {
			return err
		}
		res, err := tx.Exec(ctx, `UPDATE oauth_grants SET revoked_at = $1, revoked_reason = $2
			WHERE organization_id = $3 AND client_id = $4 AND revoked_at IS NULL`, micros(c.UpdatedAt), reason, c.OrganizationID, c.ClientID)
		if err != nil {
			return err
		}
		n = res.RowsAffected()
		if e != nil {
			e.Reason = fmt.Sprintf("%d consents revoked", n)
		}
		return appendAuditTx(ctx, tx, e)
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
		used    *int64
	)
	err := r.Scan(&c.Hash, &c.OrganizationID, &c.GrantID, &c.ClientID, &c.RedirectURI, &c.Challenge, &expires, &used)
	c.ExpiresAt, c.UsedAt = fromMicros(expires), fromOptMicros(used)
	return c, err
}

// InsertOAuthCode stores c, or answers an error wrapping
// toolplane.ErrExists.
func (s *Store) InsertOAuthCode(ctx context.Context, c *toolplane.OAuthCode) error {
	err := insertCode(ctx, s.pool, c)
	if isDuplicate(err) {
		return fmt.Errorf("insert oauth code: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert oauth code: %w", err)
	}
	return nil
}

// insertCode inserts c through db: the pool, or a transaction.
func insertCode(ctx context.Context, db execer, c *toolplane.OAuthCode) error {
	_, err := db.Exec(ctx, `INSERT INTO oauth_codes (`+oauthCodeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		c.Hash, c.OrganizationID, c.GrantID, c.ClientID, c.RedirectURI, c.Challenge, micros(c.ExpiresAt), optMicros(c.UsedAt))
	return err
}

// TakeOAuthCode marks the code used and answers it, in one statement; a
// second take answers it with toolplane.ErrReused.
func (s *Store) TakeOAuthCode(ctx context.Context, hash string, now time.Time) (*toolplane.OAuthCode, error) {
	c, err := scanOAuthCode(s.pool.QueryRow(ctx, `UPDATE oauth_codes SET used_at = $1 WHERE hash = $2 AND used_at IS NULL
		RETURNING `+oauthCodeColumns, micros(now), hash))
	if err == nil {
		return &c, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("take oauth code: %w", err)
	}
	c, err = scanOAuthCode(s.pool.QueryRow(ctx, `SELECT `+oauthCodeColumns+` FROM oauth_codes WHERE hash = $1`, hash))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("take oauth code: %w", toolplane.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("take oauth code: %w", err)
	}
	return &c, fmt.Errorf("take oauth code: %w", toolplane.ErrReused)
}

const oauthRefreshColumns = `hash, organization_id, grant_id, created_at, expires_at, used_at`

func scanOAuthRefresh(r scanner) (toolplane.OAuthRefreshToken, error) {
	var (
		t                toolplane.OAuthRefreshToken
		created, expires int64
		used             *int64
	)
	err := r.Scan(&t.Hash, &t.OrganizationID, &t.GrantID, &created, &expires, &used)
	t.CreatedAt, t.ExpiresAt, t.UsedAt = fromMicros(created), fromMicros(expires), fromOptMicros(used)
	return t, err
}

// InsertOAuthRefreshToken stores t, or answers an error wrapping
// toolplane.ErrExists.
func (s *Store) InsertOAuthRefreshToken(ctx context.Context, t *toolplane.OAuthRefreshToken) error {
	return insertRefresh(ctx, s.pool, t)
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func insertRefresh(ctx context.Context, db execer, t *toolplane.OAuthRefreshToken) error {
	_, err := db.Exec(ctx, `INSERT INTO oauth_refresh_tokens (`+oauthRefreshColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
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
	t, err := scanOAuthRefresh(s.pool.QueryRow(ctx, `SELECT `+oauthRefreshColumns+` FROM oauth_refresh_tokens WHERE hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get oauth refresh token: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get oauth refresh token: %w", err)
	}
	return &t, nil
}

// RotateOAuthRefreshToken marks the token used and stores next in one
// transaction; a token used already answers toolplane.ErrReused. The
// conditional update decides between two nodes presenting it at once.
func (s *Store) RotateOAuthRefreshToken(ctx context.Context, hash string, next *toolplane.OAuthRefreshToken, now time.Time) (*toolplane.OAuthRefreshToken, error) {
	var (
		t     toolplane.OAuthRefreshToken
		fresh bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		t, err = scanOAuthRefresh(tx.QueryRow(ctx, `UPDATE oauth_refresh_tokens SET used_at = $1 WHERE hash = $2 AND used_at IS NULL
			RETURNING `+oauthRefreshColumns, micros(now), hash))
		if errors.Is(err, pgx.ErrNoRows) {
			fresh = false
			t, err = scanOAuthRefresh(tx.QueryRow(ctx, `SELECT `+oauthRefreshColumns+` FROM oauth_refresh_tokens WHERE hash = $1`, hash))
			return err
		}
		if err != nil {
			return err
		}
		fresh = true
		return insertRefresh(ctx, tx, next)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("rotate oauth refresh token: %w", toolplane.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("rotate oauth refresh token: %w", err)
	case !fresh:
		return &t, fmt.Errorf("rotate oauth refresh token: %w", toolplane.ErrReused)
	}
	return &t, nil
}

// InsertOAuthSigningKey stores k, or answers an error wrapping
// toolplane.ErrExists.
func (s *Store) InsertOAuthSigningKey(ctx context.Context, k *toolplane.OAuthSigningKey) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO oauth_signing_keys (id, sealed, public, created_at, retired_at) VALUES ($1, $2, $3, $4, $5)`,
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
	rows, err := s.pool.Query(ctx, `SELECT id, sealed, public, created_at, retired_at FROM oauth_signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("oauth signing keys: %w", err)
	}
	defer rows.Close()
	var out []toolplane.OAuthSigningKey
	for rows.Next() {
		var (
			k       toolplane.OAuthSigningKey
			created int64
			retired *int64
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
	res, err := s.pool.Exec(ctx, `UPDATE oauth_signing_keys SET retired_at = $1 WHERE id = $2 AND retired_at IS NULL`, micros(at), id)
	if err != nil {
		return false, fmt.Errorf("retire oauth signing key: %w", err)
	}
	return res.RowsAffected() == 1, nil
}

// DeleteOAuthExpired removes codes and refresh tokens expired before
// before, at most limit of each.
func (s *Store) DeleteOAuthExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	for _, table := range []string{"oauth_codes", "oauth_refresh_tokens"} {
		res, err := s.pool.Exec(ctx, `DELETE FROM `+table+` WHERE hash IN (SELECT hash FROM `+table+` WHERE expires_at < $1 LIMIT $2)`, micros(before), limit)
		if err != nil {
			return int(n), fmt.Errorf("delete expired %s: %w", table, err)
		}
		n += res.RowsAffected()
	}
	return int(n), nil
}
