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

const sessionColumns = `organization_id, id, credential_id, door, protocol_version, client, run_id,
	contracts, created_at, expires_at`

func scanSession(r scanner) (toolplane.Session, error) {
	var (
		s                toolplane.Session
		client           []byte
		contracts        string
		created, expires int64
	)
	if err := r.Scan(&s.OrganizationID, &s.ID, &s.CredentialID, &s.Door, &s.ProtocolVersion, &client, &s.RunID,
		&contracts, &created, &expires); err != nil {
		return s, err
	}
	if len(client) > 0 {
		s.Client = client
	}
	var err error
	if s.Contracts, err = fromContracts(contracts); err != nil {
		return s, fmt.Errorf("contracts: %w", err)
	}
	s.CreatedAt, s.ExpiresAt = fromMicros(created), fromMicros(expires)
	return s, nil
}

// contractsJSON answers a session's contracts as their column holds them: a
// JSON object, "{}" when empty.
func contractsJSON(c map[string]string) (string, error) {
	if len(c) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(c)
	return string(b), err
}

// fromContracts answers a contracts column's map, nil when empty.
func fromContracts(s string) (map[string]string, error) {
	var c map[string]string
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		return nil, err
	}
	if len(c) == 0 {
		return nil, nil
	}
	return c, nil
}

// InsertSession stores sess, or answers an error wrapping
// toolplane.ErrExists when its organization holds a session with its ID.
func (s *Store) InsertSession(ctx context.Context, sess *toolplane.Session) error {
	contracts, err := contractsJSON(sess.Contracts)
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	_, err = s.exec(ctx, `INSERT INTO mcp_sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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

// GetSession answers the organization's session with that id, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, org, id string) (*toolplane.Session, error) {
	sess, err := scanSession(s.queryRow(ctx, `SELECT `+sessionColumns+` FROM mcp_sessions WHERE organization_id = ? AND id = ?`, org, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get session: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return &sess, nil
}

// TouchSession moves the session's expiry to until unless the stored one is
// later, in one statement. SQLite counts a matched row as changed even when
// the CASE keeps its value, so no change means no such session in org.
func (s *Store) TouchSession(ctx context.Context, org, id string, until time.Time) error {
	t := micros(until)
	res, err := s.exec(ctx, `UPDATE mcp_sessions SET expires_at = CASE WHEN expires_at >= ? THEN expires_at ELSE ? END
		WHERE organization_id = ? AND id = ?`, t, t, org, id)
	return sessionChanged("touch session", res, err)
}

// SetSessionContracts replaces the session's frozen contracts.
func (s *Store) SetSessionContracts(ctx context.Context, org, id string, contracts map[string]string) error {
	c, err := contractsJSON(contracts)
	if err != nil {
		return fmt.Errorf("set session contracts: %w", err)
	}
	res, err := s.exec(ctx, `UPDATE mcp_sessions SET contracts = ? WHERE organization_id = ? AND id = ?`, c, org, id)
	return sessionChanged("set session contracts", res, err)
}

// sessionChanged answers nil when the statement changed one session, an
// error wrapping toolplane.ErrNotFound when it changed none.
func sessionChanged(op string, res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	ok, err := affected(res)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w", op, toolplane.ErrNotFound)
	}
	return nil
}

// DeleteSession removes the organization's session with that id.
func (s *Store) DeleteSession(ctx context.Context, org, id string) (bool, error) {
	res, err := s.exec(ctx, `DELETE FROM mcp_sessions WHERE organization_id = ? AND id = ?`, org, id)
	if err != nil {
		return false, fmt.Errorf("delete session: %w", err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("delete session: %w", err)
	}
	return ok, nil
}

// DeleteExpiredSessions removes up to limit sessions of any organization
// that expired before now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	res, err := s.exec(ctx, `DELETE FROM mcp_sessions WHERE (organization_id, id) IN
		(SELECT organization_id, id FROM mcp_sessions WHERE expires_at < ? ORDER BY expires_at LIMIT ?)`, micros(now), limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return int(n), nil
}
