package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

const browserSessionColumns = `organization_id, id, token_hash, subject, method, credential_id, roles,
	created_at, idle_until, expires_at`

func scanBrowserSession(r scanner) (toolplane.BrowserSession, error) {
	var (
		b                      toolplane.BrowserSession
		roles                  string
		created, idle, expires int64
	)
	if err := r.Scan(&b.OrganizationID, &b.ID, &b.TokenHash, &b.Subject, &b.Method, &b.CredentialID, &roles,
		&created, &idle, &expires); err != nil {
		return b, err
	}
	var err error
	if b.Roles, err = fromNames(roles); err != nil {
		return b, fmt.Errorf("roles: %w", err)
	}
	b.CreatedAt, b.IdleUntil, b.ExpiresAt = fromMicros(created), fromMicros(idle), fromMicros(expires)
	return b, nil
}

// InsertBrowserSession stores b, or answers an error wrapping
// toolplane.ErrExists when its organization holds a session with its ID or
// any organization one with its token hash.
func (s *Store) InsertBrowserSession(ctx context.Context, b *toolplane.BrowserSession) error {
	roles, err := names("roles", b.Roles)
	if err != nil {
		return fmt.Errorf("insert browser session: %w", err)
	}
	_, err = s.exec(ctx, `INSERT INTO browser_sessions (`+browserSessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.OrganizationID, b.ID, b.TokenHash, b.Subject, b.Method, b.CredentialID, roles,
		micros(b.CreatedAt), micros(b.IdleUntil), micros(b.ExpiresAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert browser session: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert browser session: %w", err)
	}
	return nil
}

// FindBrowserSession answers the session whose token hash is hash, in any
// organization, or an error wrapping toolplane.ErrNotFound.
func (s *Store) FindBrowserSession(ctx context.Context, hash string) (*toolplane.BrowserSession, error) {
	b, err := scanBrowserSession(s.queryRow(ctx, `SELECT `+browserSessionColumns+` FROM browser_sessions WHERE token_hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find browser session: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find browser session: %w", err)
	}
	return &b, nil
}

// TouchBrowserSession moves the session's idle end to until, unless the
// stored one is later, and never past its absolute end, in one statement.
func (s *Store) TouchBrowserSession(ctx context.Context, org, id string, until time.Time) error {
	t := micros(until)
	res, err := s.exec(ctx, `UPDATE browser_sessions SET idle_until = MIN(expires_at, MAX(idle_until, ?))
		WHERE organization_id = ? AND id = ?`, t, org, id)
	return sessionChanged("touch browser session", res, err)
}

// DeleteBrowserSession removes the organization's session with that id.
func (s *Store) DeleteBrowserSession(ctx context.Context, org, id string) (bool, error) {
	res, err := s.exec(ctx, `DELETE FROM browser_sessions WHERE organization_id = ? AND id = ?`, org, id)
	if err != nil {
		return false, fmt.Errorf("delete browser session: %w", err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("delete browser session: %w", err)
	}
	return ok, nil
}

// DeleteBrowserSessionsOf removes every session of subject in org.
func (s *Store) DeleteBrowserSessionsOf(ctx context.Context, org, subject string) (int, error) {
	res, err := s.exec(ctx, `DELETE FROM browser_sessions WHERE organization_id = ? AND subject = ?`, org, subject)
	if err != nil {
		return 0, fmt.Errorf("delete browser sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete browser sessions: %w", err)
	}
	return int(n), nil
}

// DeleteExpiredBrowserSessions removes up to limit sessions of any
// organization whose idle end is before now.
func (s *Store) DeleteExpiredBrowserSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete expired browser sessions: %w", err)
	}
	res, err := s.exec(ctx, `DELETE FROM browser_sessions WHERE (organization_id, id) IN
		(SELECT organization_id, id FROM browser_sessions WHERE idle_until < ? ORDER BY idle_until LIMIT ?)`, micros(now), limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired browser sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete expired browser sessions: %w", err)
	}
	return int(n), nil
}
