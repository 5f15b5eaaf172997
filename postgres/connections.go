package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanConnection(r scanner) (toolplane.Connection, error) {
	var (
		c                                   toolplane.Connection
		config, scope                       []byte
		created, updated                    int64
		tokenExpires, refreshUntil, revoked *int64
	)
	err := r.Scan(&c.OrganizationID, &c.ID, &c.Name, &c.Provider, &c.Kind, &c.UserID, &c.State, &c.Reason,
		&config, &scope, &c.Scopes, &c.Secret, &tokenExpires, &c.RefreshOwner, &refreshUntil,
		&c.Owner, &created, &updated, &revoked, &c.Version)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(config, &c.Config); err != nil {
		return c, fmt.Errorf("connection %s config: %w", c.ID, err)
	}
	if err := json.Unmarshal(scope, &c.Scope); err != nil {
		return c, fmt.Errorf("connection %s scope: %w", c.ID, err)
	}
	if len(c.Scopes) == 0 {
		c.Scopes = nil
	}
	c.TokenExpiresAt = fromOptMicros(tokenExpires)
	c.RefreshUntil = fromOptMicros(refreshUntil)
	c.CreatedAt = fromMicros(created)
	c.UpdatedAt = fromMicros(updated)
	c.RevokedAt = fromOptMicros(revoked)
	return c, nil
}

// connectionJSON answers a connection's config and scope as their JSONB
// columns take them, and its scopes as their TEXT[] column does.
func connectionJSON(c *toolplane.Connection) (config, scope string, scopes []string, err error) {
	b, err := json.Marshal(c.Config)
	if err != nil {
		return "", "", nil, fmt.Errorf("config: %w", err)
	}
	config = string(b)
	if b, err = json.Marshal(c.Scope); err != nil {
		return "", "", nil, fmt.Errorf("scope: %w", err)
	}
	scope = string(b)
	if scopes, err = names("scopes", c.Scopes); err != nil {
		return "", "", nil, err
	}
	return config, scope, scopes, nil
}

// insertConnectionRecorded is the insert of a connection and of its change
// record as one statement, atomic as a transaction and one round trip.
var insertConnectionRecorded = guarded(`INSERT INTO connections (`+connectionColumns+`)
		VALUES (`+dialect.Placeholders(1, 20)+`)`, 20, "changes", changeColumns, changeArgCount)

// InsertConnection stores c and appends ch in one statement. A duplicate
// ID, a name held by a connection of the organization that is not revoked,
// or a duplicate change ID answers an error wrapping toolplane.ErrExists,
// and stores neither.
func (s *Store) InsertConnection(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) error {
	config, scope, scopes, err := connectionJSON(c)
	if err != nil {
		return fmt.Errorf("insert connection %s: %w", c.ID, err)
	}
	_, err = s.pool.Exec(ctx, insertConnectionRecorded, append([]any{
		c.OrganizationID, c.ID, c.Name, c.Provider, string(c.Kind), c.UserID, string(c.State), c.Reason,
		config, scope, scopes, blob(c.Secret), optMicros(c.TokenExpiresAt), c.RefreshOwner, optMicros(c.RefreshUntil),
		c.Owner, micros(c.CreatedAt), micros(c.UpdatedAt), optMicros(c.RevokedAt), c.Version,
	}, changeArgs(ch)...)...)
	if isDuplicate(err) {
		return fmt.Errorf("insert connection %s: %w", c.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert connection %s: %w", c.ID, err)
	}
	return nil
}

// GetConnection answers the organization's connection, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetConnection(ctx context.Context, org, id string) (*toolplane.Connection, error) {
	if !dialect.Text(org) || !dialect.Text(id) {
		// No TEXT value holds it, so no connection has it; asking would
		// answer a database error.
		return nil, fmt.Errorf("get connection %q: %w", id, toolplane.ErrNotFound)
	}
	row := s.pool.QueryRow(ctx, `SELECT `+connectionColumns+` FROM connections
		WHERE organization_id = $1 AND id = $2`, org, id)
	c, err := scanConnection(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get connection %s: %w", id, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get connection %s: %w", id, err)
	}
	return &c, nil
}

// ListConnections answers the organization's connections matching f,
// oldest first (ties by ID), after the cursor. The next cursor is "" when
// no connection follows.
func (s *Store) ListConnections(ctx context.Context, org string, f toolplane.ConnectionFilter, after string, limit int) ([]toolplane.Connection, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListConnections(&q, dialect, org, f, after, limit)
	return page(ctx, s, "list connections", &q, err, limit, scanConnection, sqlstore.ConnectionCursor)
}

// updateConnection writes what an update may write where the stored
// organization, ID and version match. A revoked connection stays revoked
// with its revocation time: the CASEs read the stored row, not the new one.
const updateConnection = `UPDATE connections SET
		name = $1, reason = $2, config = $3, scope = $4, scopes = $5, secret = $6,
		token_expires_at = $7, refresh_owner = $8, refresh_until = $9, updated_at = $10,
		state = CASE WHEN state = 'revoked' THEN state ELSE $11 END,
		revoked_at = CASE WHEN state = 'revoked' THEN revoked_at ELSE $12 END,
		version = version + 1
	WHERE organization_id = $13 AND id = $14 AND version = $15`

// updateConnectionRecorded is the update and the insert of its change
// record as one statement: a stale version inserts no change, and a change
// that cannot be stored undoes the update.
var updateConnectionRecorded = guarded(updateConnection, 15, "changes", changeColumns, changeArgCount)

// UpdateConnection writes c where the stored organization, ID and version
// are c's, in one conditional statement, and on success sets c.Version to
// the new version. ch, when not nil, is appended by the same statement, and
// only when the update wrote. A name held by another connection that is
// not revoked, or a duplicate change ID, answers an error wrapping
// toolplane.ErrExists and writes nothing.
func (s *Store) UpdateConnection(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) (bool, error) {
	if !dialect.Text(c.OrganizationID) || !dialect.Text(c.ID) {
		return false, nil // no stored connection has it
	}
	config, scope, scopes, err := connectionJSON(c)
	if err != nil {
		return false, fmt.Errorf("update connection %s: %w", c.ID, err)
	}
	q, args := updateConnection, []any{c.Name, c.Reason, config, scope, scopes, blob(c.Secret),
		optMicros(c.TokenExpiresAt), c.RefreshOwner, optMicros(c.RefreshUntil), micros(c.UpdatedAt),
		string(c.State), optMicros(c.RevokedAt),
		c.OrganizationID, c.ID, c.Version}
	if ch != nil {
		q, args = updateConnectionRecorded, append(args, changeArgs(ch)...)
	}
	tag, err := s.pool.Exec(ctx, q, args...)
	if isDuplicate(err) {
		return false, fmt.Errorf("update connection %s: %w", c.ID, toolplane.ErrExists)
	}
	if err != nil {
		return false, fmt.Errorf("update connection %s: %w", c.ID, err)
	}
	ok := tag.RowsAffected() == 1
	if ok {
		c.Version++
	}
	return ok, nil
}

// ListAllConnections answers every organization's connections by ID (ties
// by organization), after the cursor. The next cursor is "" when no
// connection follows.
func (s *Store) ListAllConnections(ctx context.Context, after string, limit int) ([]toolplane.Connection, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListAllConnections(&q, dialect, after, limit)
	return page(ctx, s, "list all connections", &q, err, limit, scanConnection, sqlstore.EveryConnectionCursor)
}

const oauthStateColumns = `id, organization_id, connection_id, user_id, verifier, redirect_uri,
	created_at, expires_at`

// InsertOAuthState stores st, or answers an error wrapping
// toolplane.ErrExists when a state with its ID exists in any organization.
func (s *Store) InsertOAuthState(ctx context.Context, st *toolplane.OAuthState) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO oauth_states (`+oauthStateColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		st.ID, st.OrganizationID, st.ConnectionID, st.UserID, blob(st.Verifier), st.RedirectURI,
		micros(st.CreatedAt), micros(st.ExpiresAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert oauth state: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert oauth state: %w", err)
	}
	return nil
}

// TakeOAuthState deletes the state with that ID and answers it, in one
// statement, so of concurrent takers one gets the row and the others find
// none. An expired state is deleted all the same and answers
// toolplane.ErrNotFound. Errors never name the ID: it is the bearer's
// proof of the authorization under way.
func (s *Store) TakeOAuthState(ctx context.Context, id string, now time.Time) (*toolplane.OAuthState, error) {
	if !dialect.Text(id) {
		// No TEXT value holds it, so no state has it.
		return nil, fmt.Errorf("take oauth state: %w", toolplane.ErrNotFound)
	}
	var (
		st               toolplane.OAuthState
		created, expires int64
	)
	err := s.pool.QueryRow(ctx, `DELETE FROM oauth_states WHERE id = $1 RETURNING `+oauthStateColumns, id).
		Scan(&st.ID, &st.OrganizationID, &st.ConnectionID, &st.UserID, &st.Verifier, &st.RedirectURI, &created, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("take oauth state: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("take oauth state: %w", err)
	}
	st.CreatedAt, st.ExpiresAt = fromMicros(created), fromMicros(expires)
	if !st.ExpiresAt.After(now) {
		return nil, fmt.Errorf("take oauth state: expired: %w", toolplane.ErrNotFound)
	}
	return &st, nil
}

// DeleteExpiredOAuthStates removes up to limit states of any organization
// that expired at or before now.
func (s *Store) DeleteExpiredOAuthStates(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete expired oauth states: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM oauth_states WHERE id IN
		(SELECT id FROM oauth_states WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)`, micros(now), limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired oauth states: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
