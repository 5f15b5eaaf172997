package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

const browserSessionColumns = `organization_id, id, token_hash, subject, method, credential_id, roles,
	created_at, idle_until, expires_at`

func scanBrowserSession(r scanner) (toolplane.BrowserSession, error) {
	var (
		b                      toolplane.BrowserSession
		created, idle, expires int64
	)
	if err := r.Scan(&b.OrganizationID, &b.ID, &b.TokenHash, &b.Subject, &b.Method, &b.CredentialID, &b.Roles,
		&created, &idle, &expires); err != nil {
		return b, err
	}
	if len(b.Roles) == 0 {
		b.Roles = nil
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
	_, err = s.pool.Exec(ctx, `INSERT INTO browser_sessions (`+browserSessionColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
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
	// The hash comes from a cookie and may hold any byte; TEXT cannot, and
	// no session has such a hash.
	if !dialect.Text(hash) {
		return nil, fmt.Errorf("find browser session: %w", toolplane.ErrNotFound)
	}
	b, err := scanBrowserSession(s.pool.QueryRow(ctx, `SELECT `+browserSessionColumns+` FROM browser_sessions WHERE token_hash = $1`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
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
	if !dialect.Text(org) || !dialect.Text(id) {
		return fmt.Errorf("touch browser session: %w", toolplane.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE browser_sessions SET idle_until = LEAST(expires_at, GREATEST(idle_until, $1))
		WHERE organization_id = $2 AND id = $3`, micros(until), org, id)
	return sessionChanged("touch browser session", tag, err)
}

// DeleteBrowserSession removes the organization's session with that id.
func (s *Store) DeleteBrowserSession(ctx context.Context, org, id string) (bool, error) {
	if !dialect.Text(org) || !dialect.Text(id) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM browser_sessions WHERE organization_id = $1 AND id = $2`, org, id)
	if err != nil {
		return false, fmt.Errorf("delete browser session: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteBrowserSessionsOf removes every session of subject in org.
func (s *Store) DeleteBrowserSessionsOf(ctx context.Context, org, subject string) (int, error) {
	if !dialect.Text(org) || !dialect.Text(subject) {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM browser_sessions WHERE organization_id = $1 AND subject = $2`, org, subject)
	if err != nil {
		return 0, fmt.Errorf("delete browser sessions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteExpiredBrowserSessions removes up to limit sessions of any
// organization whose idle end is before now.
func (s *Store) DeleteExpiredBrowserSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete expired browser sessions: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM browser_sessions WHERE (organization_id, id) IN
		(SELECT organization_id, id FROM browser_sessions WHERE idle_until < $1 ORDER BY idle_until LIMIT $2)`, micros(now), limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired browser sessions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
