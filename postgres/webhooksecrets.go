package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

var _ toolplane.WebhookSecretStore = (*Store)(nil)

const webhookSecretColumns = `organization_id, current_id, current_secret, created_at, previous_id, previous_secret, previous_until, rotated_by, version`

func scanWebhookSecret(r scanner) (toolplane.WebhookSecret, error) {
	var (
		w       toolplane.WebhookSecret
		created int64
		until   *int64
	)
	if err := r.Scan(&w.OrganizationID, &w.CurrentID, &w.Current, &created, &w.PreviousID, &w.Previous, &until, &w.RotatedBy, &w.Version); err != nil {
		return w, err
	}
	w.CreatedAt, w.PreviousUntil = fromMicros(created), fromOptMicros(until)
	return w, nil
}

// InsertWebhookSecret stores w, or answers an error wrapping
// toolplane.ErrExists when the organization has a secret.
func (s *Store) InsertWebhookSecret(ctx context.Context, w *toolplane.WebhookSecret) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_secrets (`+webhookSecretColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		w.OrganizationID, w.CurrentID, w.Current, micros(w.CreatedAt), w.PreviousID, blob(w.Previous), optMicros(w.PreviousUntil), w.RotatedBy, w.Version)
	if isDuplicate(err) {
		return fmt.Errorf("insert webhook secret: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert webhook secret: %w", err)
	}
	return nil
}

// GetWebhookSecret answers the organization's secret, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetWebhookSecret(ctx context.Context, org string) (*toolplane.WebhookSecret, error) {
	w, err := scanWebhookSecret(s.pool.QueryRow(ctx, `SELECT `+webhookSecretColumns+` FROM webhook_secrets WHERE organization_id = $1`, org))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get webhook secret: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get webhook secret: %w", err)
	}
	return &w, nil
}

// UpdateWebhookSecret writes w where the stored version is w.Version.
func (s *Store) UpdateWebhookSecret(ctx context.Context, w *toolplane.WebhookSecret) (bool, error) {
	res, err := s.pool.Exec(ctx, `UPDATE webhook_secrets SET current_id = $1, current_secret = $2, created_at = $3, previous_id = $4,
		previous_secret = $5, previous_until = $6, rotated_by = $7, version = version + 1
		WHERE organization_id = $8 AND version = $9`,
		w.CurrentID, w.Current, micros(w.CreatedAt), w.PreviousID, blob(w.Previous), optMicros(w.PreviousUntil), w.RotatedBy,
		w.OrganizationID, w.Version)
	if err != nil {
		return false, fmt.Errorf("update webhook secret: %w", err)
	}
	ok := res.RowsAffected() == 1
	if ok {
		w.Version++
	}
	return ok, nil
}

// WebhookSecretsAfter answers the secrets of the organizations after
// afterOrg, by organization.
func (s *Store) WebhookSecretsAfter(ctx context.Context, afterOrg string, limit int) ([]toolplane.WebhookSecret, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("webhook secrets after: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+webhookSecretColumns+` FROM webhook_secrets
		WHERE organization_id > $1 ORDER BY organization_id LIMIT $2`, afterOrg, limit)
	if err != nil {
		return nil, fmt.Errorf("webhook secrets after: %w", err)
	}
	ws, err := collect(rows, scanWebhookSecret)
	if err != nil {
		return nil, fmt.Errorf("webhook secrets after: %w", err)
	}
	return ws, nil
}
