package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
)

var _ toolplane.SlackLinkStore = (*Store)(nil)

const slackLinkColumns = `organization_id, team, user_id, credential_id, subject, channel, created_at`

func scanSlackLink(r scanner) (toolplane.SlackLink, error) {
	var (
		l       toolplane.SlackLink
		created int64
	)
	if err := r.Scan(&l.OrganizationID, &l.Team, &l.User, &l.CredentialID, &l.Subject, &l.Channel, &created); err != nil {
		return l, err
	}
	l.CreatedAt = fromMicros(created)
	return l, nil
}

// PutSlackLink stores l, replacing the organization's link of its team
// and user, and appends e in the same write.
func (s *Store) PutSlackLink(ctx context.Context, l *toolplane.SlackLink, e *toolplane.AuditEvent) error {
	_, err := s.audited(ctx, nil, e, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		_, err := s.txExec(ctx, tx, `INSERT INTO slack_links (`+slackLinkColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (organization_id, team, user_id) DO UPDATE SET
		credential_id = excluded.credential_id, subject = excluded.subject, channel = excluded.channel, created_at = excluded.created_at`,
			l.OrganizationID, l.Team, l.User, l.CredentialID, l.Subject, l.Channel, micros(l.CreatedAt))
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("put slack link: %w", err)
	}
	return nil
}

// GetSlackLink answers the organization's link of team and user, or an
// error wrapping toolplane.ErrNotFound.
func (s *Store) GetSlackLink(ctx context.Context, org, team, user string) (*toolplane.SlackLink, error) {
	l, err := scanSlackLink(s.queryRow(ctx, `SELECT `+slackLinkColumns+` FROM slack_links
		WHERE organization_id = ? AND team = ? AND user_id = ?`, org, team, user))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get slack link: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get slack link: %w", err)
	}
	return &l, nil
}

// DeleteSlackLink removes the organization's link of team and user, and
// appends e in the same write when it did.
func (s *Store) DeleteSlackLink(ctx context.Context, org, team, user string, e *toolplane.AuditEvent) (bool, error) {
	ok, err := s.audited(ctx, nil, e, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		res, err := s.txExec(ctx, tx, `DELETE FROM slack_links WHERE organization_id = ? AND team = ? AND user_id = ?`, org, team, user)
		if err != nil {
			return false, err
		}
		return affected(res)
	})
	if err != nil {
		return false, fmt.Errorf("delete slack link: %w", err)
	}
	return ok, nil
}

// ListSlackLinks answers the organization's links by team and user.
func (s *Store) ListSlackLinks(ctx context.Context, org string) ([]toolplane.SlackLink, error) {
	rows, err := s.query(ctx, `SELECT `+slackLinkColumns+` FROM slack_links
		WHERE organization_id = ? ORDER BY team, user_id`, org)
	if err != nil {
		return nil, fmt.Errorf("list slack links: %w", err)
	}
	ls, err := collect(rows, scanSlackLink)
	if err != nil {
		return nil, fmt.Errorf("list slack links: %w", err)
	}
	return ls, nil
}
