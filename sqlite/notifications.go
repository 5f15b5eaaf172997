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

var _ toolplane.NotificationStore = (*Store)(nil)

const channelColumns = `organization_id, id, name, approver_group, kind, config, secret, secondary, created_by, created_at`

func scanChannel(r scanner) (toolplane.NotificationChannel, error) {
	var (
		c       toolplane.NotificationChannel
		config  string
		created int64
	)
	if err := r.Scan(&c.OrganizationID, &c.ID, &c.Name, &c.Group, &c.Kind, &config, &c.Secret, &c.Secondary, &c.CreatedBy, &created); err != nil {
		return c, err
	}
	if err := json.Unmarshal([]byte(config), &c.Config); err != nil {
		return c, fmt.Errorf("channel %s config: %w", c.ID, err)
	}
	c.CreatedAt = fromMicros(created)
	return c, nil
}

// InsertNotificationChannel stores c, or answers an error wrapping
// toolplane.ErrExists when the organization holds a channel with its ID
// or name.
func (s *Store) InsertNotificationChannel(ctx context.Context, c *toolplane.NotificationChannel) error {
	config, err := json.Marshal(c.Config)
	if err != nil {
		return fmt.Errorf("insert notification channel: %w", err)
	}
	_, err = s.exec(ctx, `INSERT INTO notification_channels (`+channelColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.OrganizationID, c.ID, c.Name, c.Group, string(c.Kind), string(config), c.Secret, c.Secondary, c.CreatedBy, micros(c.CreatedAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert notification channel: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert notification channel: %w", err)
	}
	return nil
}

// GetNotificationChannel answers the organization's channel, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetNotificationChannel(ctx context.Context, org, id string) (*toolplane.NotificationChannel, error) {
	c, err := scanChannel(s.queryRow(ctx, `SELECT `+channelColumns+` FROM notification_channels
		WHERE organization_id = ? AND id = ?`, org, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get notification channel: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get notification channel: %w", err)
	}
	return &c, nil
}

// ListNotificationChannels answers the organization's channels by name.
func (s *Store) ListNotificationChannels(ctx context.Context, org string) ([]toolplane.NotificationChannel, error) {
	rows, err := s.query(ctx, `SELECT `+channelColumns+` FROM notification_channels
		WHERE organization_id = ? ORDER BY name, id`, org)
	if err != nil {
		return nil, fmt.Errorf("list notification channels: %w", err)
	}
	cs, err := collect(rows, scanChannel)
	if err != nil {
		return nil, fmt.Errorf("list notification channels: %w", err)
	}
	return cs, nil
}

// DeleteNotificationChannel removes the organization's channel.
func (s *Store) DeleteNotificationChannel(ctx context.Context, org, id string) (bool, error) {
	res, err := s.exec(ctx, `DELETE FROM notification_channels WHERE organization_id = ? AND id = ?`, org, id)
	if err != nil {
		return false, fmt.Errorf("delete notification channel: %w", err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("delete notification channel: %w", err)
	}
	return ok, nil
}

const deliveryColumns = `organization_id, event, subject, channel_id, state, attempts, error, updated_at`

func scanDelivery(r scanner) (toolplane.NotificationDelivery, error) {
	var (
		d       toolplane.NotificationDelivery
		updated int64
	)
	if err := r.Scan(&d.OrganizationID, &d.Event, &d.Subject, &d.ChannelID, &d.State, &d.Attempts, &d.Error, &updated); err != nil {
		return d, err
	}
	d.UpdatedAt = fromMicros(updated)
	return d, nil
}

// RecordDelivery stores d, replacing the row of its event, subject and
// channel.
func (s *Store) RecordDelivery(ctx context.Context, d *toolplane.NotificationDelivery) error {
	_, err := s.exec(ctx, `INSERT INTO notification_deliveries (`+deliveryColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (organization_id, event, subject, channel_id) DO UPDATE SET
		state = excluded.state, attempts = excluded.attempts, error = excluded.error, updated_at = excluded.updated_at`,
		d.OrganizationID, d.Event, d.Subject, d.ChannelID, string(d.State), d.Attempts, d.Error, micros(d.UpdatedAt))
	if err != nil {
		return fmt.Errorf("record delivery: %w", err)
	}
	return nil
}

// GetDelivery answers the row of that event, subject and channel, or an
// error wrapping toolplane.ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, org, event, subject, channel string) (*toolplane.NotificationDelivery, error) {
	d, err := scanDelivery(s.queryRow(ctx, `SELECT `+deliveryColumns+` FROM notification_deliveries
		WHERE organization_id = ? AND event = ? AND subject = ? AND channel_id = ?`, org, event, subject, channel))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get delivery: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get delivery: %w", err)
	}
	return &d, nil
}

// ListDeliveries answers the organization's deliveries in a state, most
// recently updated first.
func (s *Store) ListDeliveries(ctx context.Context, org string, state toolplane.DeliveryState, limit int) ([]toolplane.NotificationDelivery, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	rows, err := s.query(ctx, `SELECT `+deliveryColumns+` FROM notification_deliveries
		WHERE organization_id = ? AND state = ? ORDER BY updated_at DESC, event, subject, channel_id LIMIT ?`, org, string(state), limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	ds, err := collect(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return ds, nil
}

// UseLinkNonce records the nonce as used, or answers an error wrapping
// toolplane.ErrExists when it was.
func (s *Store) UseLinkNonce(ctx context.Context, org, nonce string, expires time.Time) error {
	_, err := s.exec(ctx, `INSERT INTO notification_link_nonces (organization_id, nonce, expires_at) VALUES (?, ?, ?)`,
		org, nonce, micros(expires))
	if isDuplicate(err) {
		return fmt.Errorf("use link: %w", toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("use link: %w", err)
	}
	return nil
}

// DeleteExpiredLinkNonces removes up to limit nonces, of any
// organization, whose links expired before now.
func (s *Store) DeleteExpiredLinkNonces(ctx context.Context, now time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete expired link nonces: %w", err)
	}
	res, err := s.exec(ctx, `DELETE FROM notification_link_nonces WHERE (organization_id, nonce) IN
		(SELECT organization_id, nonce FROM notification_link_nonces WHERE expires_at < ? ORDER BY expires_at LIMIT ?)`, micros(now), limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired link nonces: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete expired link nonces: %w", err)
	}
	return int(n), nil
}

// ApprovalsSince answers approvals of every organization created or
// resolved at or after since, by the later of the two, oldest first.
func (s *Store) ApprovalsSince(ctx context.Context, since time.Time, limit int) ([]toolplane.Approval, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("approvals since: %w", err)
	}
	t := micros(since)
	rows, err := s.query(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE (organization_id, id) IN (
		SELECT organization_id, id FROM approvals WHERE created_at >= ?
		UNION SELECT organization_id, id FROM approvals WHERE resolved_at >= ?)
		ORDER BY MAX(created_at, COALESCE(resolved_at, 0)), organization_id, id LIMIT ?`, t, t, limit)
	if err != nil {
		return nil, fmt.Errorf("approvals since: %w", err)
	}
	as, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("approvals since: %w", err)
	}
	return as, nil
}

// UncertainClaimsSince answers uncertain claims of every organization
// updated at or after since, oldest first.
func (s *Store) UncertainClaimsSince(ctx context.Context, since time.Time, limit int) ([]toolplane.Claim, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("uncertain claims since: %w", err)
	}
	rows, err := s.query(ctx, `SELECT `+claimSelect+` FROM claims WHERE status = 'uncertain' AND updated_at >= ?
		ORDER BY updated_at, organization_id, tool, `+claimKeyText+` LIMIT ?`, micros(since), limit)
	if err != nil {
		return nil, fmt.Errorf("uncertain claims since: %w", err)
	}
	cs, err := collect(rows, scanClaim)
	if err != nil {
		return nil, fmt.Errorf("uncertain claims since: %w", err)
	}
	return cs, nil
}

// ChannelsAfter answers channels of every organization after (afterOrg,
// afterID), by organization and ID.
func (s *Store) ChannelsAfter(ctx context.Context, afterOrg, afterID string, limit int) ([]toolplane.NotificationChannel, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("channels after: %w", err)
	}
	rows, err := s.query(ctx, `SELECT `+channelColumns+` FROM notification_channels
		WHERE organization_id > ? OR (organization_id = ? AND id > ?) ORDER BY organization_id, id LIMIT ?`, afterOrg, afterOrg, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("channels after: %w", err)
	}
	cs, err := collect(rows, scanChannel)
	if err != nil {
		return nil, fmt.Errorf("channels after: %w", err)
	}
	return cs, nil
}

// ReplaceChannelSecret sets the channel's secret to next where it holds
// prev.
func (s *Store) ReplaceChannelSecret(ctx context.Context, org, id string, prev, next []byte) (bool, error) {
	res, err := s.exec(ctx, `UPDATE notification_channels SET secret = ? WHERE organization_id = ? AND id = ? AND secret = ?`, next, org, id, prev)
	if err != nil {
		return false, fmt.Errorf("replace channel secret: %w", err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("replace channel secret: %w", err)
	}
	return ok, nil
}
