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

const sessionColumns = `organization_id, id, credential_id, door, protocol_version, client, run_id,
	contracts, created_at, expires_at`

func scanSession(r scanner) (toolplane.Session, error) {
	var (
		s                toolplane.Session
		contracts        []byte
		created, expires int64
	)
	if err := r.Scan(&s.OrganizationID, &s.ID, &s.CredentialID, &s.Door, &s.ProtocolVersion, &s.Client, &s.RunID,
		&contracts, &created, &expires); err != nil {
		return s, err
	}
	if len(s.Client) == 0 {
		s.Client = nil
	}
	if err := json.Unmarshal(contracts, &s.Contracts); err != nil {
		return s, fmt.Errorf("contracts: %w", err)
	}
	if len(s.Contracts) == 0 {
		s.Contracts = nil
	}
	s.CreatedAt, s.ExpiresAt = fromMicros(created), fromMicros(expires)
	return s, nil
}

// contractsJSON answers a session's contracts as their JSONB column takes
// them: an object, "{}" when empty.
func contractsJSON(c map[string]string) (string, error) {
	if len(c) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(c)
	return string(b), err
}

// InsertSession stores sess, or answers an error wrapping
// toolplane.ErrExists when its organization holds a session with its ID.
func (s *Store) InsertSession(ctx context.Context, sess *toolplane.Session) error {
	contracts, err := contractsJSON(sess.Contracts)
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO mcp_sessions (`+sessionColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		sess.OrganizationID, sess.ID, sess.CredentialID, sess.Door, sess.ProtocolVersion, blob(sess.Client), sess.RunID,
		contracts, micros(sess.CreatedAt), micros(sess.ExpiresAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert session: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

// sessionIDText reports whether id can be a stored session's ID. The ID
// comes from the client's Mcp-Session-Id header and may hold any byte, but a
// TEXT column holds only UTF-8 without NUL: no session has such an ID, and
// sending it would answer a database error (SQLSTATE 22021) where the
// caller must see not-found, as SQLite answers.
func sessionIDText(id string) bool {
	return dialect.Text(id)
}

// GetSession answers the organization's session with that id, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, org, id string) (*toolplane.Session, error) {
	if !sessionIDText(id) {
		return nil, fmt.Errorf("get session: %w", toolplane.ErrNotFound)
	}
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM mcp_sessions WHERE organization_id = $1 AND id = $2`, org, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get session: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return &sess, nil
}

// TouchSession moves the session's expiry to until unless the stored one is
// later, in one statement.
func (s *Store) TouchSession(ctx context.Context, org, id string, until time.Time) error {
	if !sessionIDText(id) {
		return fmt.Errorf("touch session: %w", toolplane.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE mcp_sessions SET expires_at = GREATEST(expires_at, $1)
		WHERE organization_id = $2 AND id = $3`, micros(until), org, id)
	return sessionChanged("touch session", tag, err)
}

// SetSessionContracts replaces the session's frozen contracts.
func (s *Store) SetSessionContracts(ctx context.Context, org, id string, contracts map[string]string) error {
	if !sessionIDText(id) {
		return fmt.Errorf("set session contracts: %w", toolplane.ErrNotFound)
	}
	c, err := contractsJSON(contracts)
	if err != nil {
		return fmt.Errorf("set session contracts: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE mcp_sessions SET contracts = $1 WHERE organization_id = $2 AND id = $3`, c, org, id)
	return sessionChanged("set session contracts", tag, err)
}

// sessionChanged answers nil when the statement changed one session, an
// error wrapping toolplane.ErrNotFound when it changed none.
func sessionChanged(op string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%s: %w", op, toolplane.ErrNotFound)
	}
	return nil
}

// DeleteSession removes the organization's session with that id.
func (s *Store) DeleteSession(ctx context.Context, org, id string) (bool, error) {
	if !sessionIDText(id) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM mcp_sessions WHERE organization_id = $1 AND id = $2`, org, id)
	if err != nil {
		return false, fmt.Errorf("delete session: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteExpiredSessions removes up to limit sessions of any organization
// that expired before now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM mcp_sessions WHERE (organization_id, id) IN
		(SELECT organization_id, id FROM mcp_sessions WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)`, micros(now), limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
