package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanConnection(r scanner) (toolplane.Connection, error) {
	var (
		c                                   toolplane.Connection
		config, scope, scopes               string
		created, updated                    int64
		tokenExpires, refreshUntil, revoked sql.NullInt64
	)
	err := r.Scan(&c.OrganizationID, &c.ID, &c.Name, &c.Provider, &c.Kind, &c.UserID, &c.State, &c.Reason,
		&config, &scope, &scopes, &c.Secret, &tokenExpires, &c.RefreshOwner, &refreshUntil,
		&c.Owner, &created, &updated, &revoked, &c.Version)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal([]byte(config), &c.Config); err != nil {
		return c, fmt.Errorf("connection %s config: %w", c.ID, err)
	}
	if err := json.Unmarshal([]byte(scope), &c.Scope); err != nil {
		return c, fmt.Errorf("connection %s scope: %w", c.ID, err)
	}
	if c.Scopes, err = fromNames(scopes); err != nil {
		return c, fmt.Errorf("connection %s scopes: %w", c.ID, err)
	}
	c.TokenExpiresAt = fromOptMicros(tokenExpires)
	c.RefreshUntil = fromOptMicros(refreshUntil)
	c.CreatedAt = fromMicros(created)
	c.UpdatedAt = fromMicros(updated)
	c.RevokedAt = fromOptMicros(revoked)
	return c, nil
}

// connectionJSON answers a connection's config, scope and scopes as their
// columns hold them.
func connectionJSON(c *toolplane.Connection) (config, scope, scopes string, err error) {
	b, err := json.Marshal(c.Config)
	if err != nil {
		return "", "", "", fmt.Errorf("config: %w", err)
	}
	config = string(b)
	if b, err = json.Marshal(c.Scope); err != nil {
		return "", "", "", fmt.Errorf("scope: %w", err)
	}
	scope = string(b)
	if scopes, err = names("scopes", c.Scopes); err != nil {
		return "", "", "", err
	}
	return config, scope, scopes, nil
}

const insertConnection = `INSERT INTO connections (` + connectionColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// InsertConnection stores c and appends ch in one transaction. A duplicate
// ID, a name held by a connection of the organization that is not revoked,
// or a duplicate change ID answers an error wrapping toolplane.ErrExists,
// and stores neither.
func (s *Store) InsertConnection(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) error {
	defer s.changed(c.OrganizationID, c.ID)
	config, scope, scopes, err := connectionJSON(c)
	if err != nil {
		return fmt.Errorf("insert connection %s: %w", c.ID, err)
	}
	err = s.recorded(ctx, ch, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, insertConnection,
			c.OrganizationID, c.ID, c.Name, c.Provider, string(c.Kind), c.UserID, string(c.State), c.Reason,
			config, scope, scopes, blob(c.Secret), optMicros(c.TokenExpiresAt), c.RefreshOwner, optMicros(c.RefreshUntil),
			c.Owner, micros(c.CreatedAt), micros(c.UpdatedAt), optMicros(c.RevokedAt), c.Version)
		if isDuplicate(err) {
			return toolplane.ErrExists
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("insert connection %s: %w", c.ID, err)
	}
	return nil
}

// GetConnection answers the organization's connection, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetConnection(ctx context.Context, org, id string) (*toolplane.Connection, error) {
	row := s.queryRow(ctx, `SELECT `+connectionColumns+` FROM connections
		WHERE organization_id = ? AND id = ?`, org, id)
	c, err := scanConnection(row)
	if errors.Is(err, sql.ErrNoRows) {
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
		name = ?, reason = ?, config = ?, scope = ?, scopes = ?, secret = ?,
		token_expires_at = ?, refresh_owner = ?, refresh_until = ?, updated_at = ?,
		state = CASE WHEN state = 'revoked' THEN state ELSE ? END,
		revoked_at = CASE WHEN state = 'revoked' THEN revoked_at ELSE ? END,
		version = version + 1
	WHERE organization_id = ? AND id = ? AND version = ?`

// errStale rolls back a recorded update whose version did not match: the
// change is stored only with the write it records.
var errStale = errors.New("stale version")

// UpdateConnection writes c where the stored organization, ID and version
// are c's, in one conditional statement, and on success sets c.Version to
// the new version. ch, when not nil, is appended in the same transaction,
// and only when the update wrote. A name held by another connection that
// is not revoked, or a duplicate change ID, answers an error wrapping
// toolplane.ErrExists and writes nothing.
func (s *Store) UpdateConnection(ctx context.Context, c *toolplane.Connection, ch *toolplane.Change) (bool, error) {
	defer s.changed(c.OrganizationID, c.ID)
	config, scope, scopes, err := connectionJSON(c)
	if err != nil {
		return false, fmt.Errorf("update connection %s: %w", c.ID, err)
	}
	args := []any{c.Name, c.Reason, config, scope, scopes, blob(c.Secret),
		optMicros(c.TokenExpiresAt), c.RefreshOwner, optMicros(c.RefreshUntil), micros(c.UpdatedAt),
		string(c.State), optMicros(c.RevokedAt),
		c.OrganizationID, c.ID, c.Version}
	var ok bool
	if ch == nil {
		res, err := s.exec(ctx, updateConnection, args...)
		if err == nil {
			ok, err = affected(res)
		}
		if isDuplicate(err) {
			err = toolplane.ErrExists
		}
		if err != nil {
			return false, fmt.Errorf("update connection %s: %w", c.ID, err)
		}
	} else {
		err := s.recorded(ctx, ch, func(ctx context.Context, tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, updateConnection, args...)
			if isDuplicate(err) {
				return toolplane.ErrExists
			}
			if err != nil {
				return err
			}
			if ok, err = affected(res); err != nil {
				return err
			}
			if !ok {
				return errStale
			}
			return nil
		})
		if errors.Is(err, errStale) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("update connection %s: %w", c.ID, err)
		}
	}
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
	_, err := s.exec(ctx, `INSERT INTO oauth_states (`+oauthStateColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
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
	q, err := s.prepared(ctx, `DELETE FROM oauth_states WHERE id = ? RETURNING `+oauthStateColumns)
	if err != nil {
		return nil, fmt.Errorf("take oauth state: %w", err)
	}
	var (
		st               toolplane.OAuthState
		created, expires int64
	)
	found := false
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		err := tx.StmtContext(ctx, q).QueryRowContext(ctx, id).Scan(&st.ID, &st.OrganizationID, &st.ConnectionID, &st.UserID,
			&st.Verifier, &st.RedirectURI, &created, &expires)
		// A state not there is an answer, not a failure: a failure would
		// run the writes grouped with this one again, and anyone can
		// send a callback with a made-up state.
		found = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err == nil && !found {
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
	res, err := s.exec(ctx, `DELETE FROM oauth_states WHERE id IN
		(SELECT id FROM oauth_states WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`, micros(now), limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired oauth states: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete expired oauth states: %w", err)
	}
	return int(n), nil
}
