package postgres

import (
	"context"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5"

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

// putSlackLink writes a link, replacing the organization's of its team
// and user, and its audit event, in one statement.
var putSlackLink = audited(`INSERT INTO slack_links (`+slackLinkColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (organization_id, team, user_id) DO UPDATE SET
		credential_id = excluded.credential_id, subject = excluded.subject, channel = excluded.channel, created_at = excluded.created_at`, 7, false)

// deleteSlackLink removes a link and writes its audit event when it did.
var deleteSlackLink = audited(`DELETE FROM slack_links WHERE organization_id = $1 AND team = $2 AND user_id = $3`, 3, false)

// PutSlackLink stores l, replacing the organization's link of its team
// and user, and appends e in the same statement.
func (s *Store) PutSlackLink(ctx context.Context, l *toolplane.SlackLink, e *toolplane.AuditEvent) error {
	_, err := s.execAudited(ctx, putSlackLink, []any{l.OrganizationID, l.Team, l.User, l.CredentialID, l.Subject, l.Channel, micros(l.CreatedAt)}, nil, e)
	if err != nil {
		return fmt.Errorf("put slack link: %w", err)
	}
	return nil
}

// GetSlackLink answers the organization's link of team and user, or an
// error wrapping toolplane.ErrNotFound.
func (s *Store) GetSlackLink(ctx context.Context, org, team, user string) (*toolplane.SlackLink, error) {
	l, err := scanSlackLink(s.pool.QueryRow(ctx, `SELECT `+slackLinkColumns+` FROM slack_links
		WHERE organization_id = $1 AND team = $2 AND user_id = $3`, org, team, user))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get slack link: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get slack link: %w", err)
	}
	return &l, nil
}

// DeleteSlackLink removes the organization's link of team and user, and
// appends e in the same statement when it did.
func (s *Store) DeleteSlackLink(ctx context.Context, org, team, user string, e *toolplane.AuditEvent) (bool, error) {
	ok, err := s.execAudited(ctx, deleteSlackLink, []any{org, team, user}, nil, e)
	if err != nil {
		return false, fmt.Errorf("delete slack link: %w", err)
	}
	return ok, nil
}

// ListSlackLinks answers the organization's links by team and user.
func (s *Store) ListSlackLinks(ctx context.Context, org string) ([]toolplane.SlackLink, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+slackLinkColumns+` FROM slack_links
		WHERE organization_id = $1 ORDER BY team, user_id`, org)
	if err != nil {
		return nil, fmt.Errorf("list slack links: %w", err)
	}
	ls, err := collect(rows, scanSlackLink)
	if err != nil {
		return nil, fmt.Errorf("list slack links: %w", err)
	}
	return ls, nil
}
