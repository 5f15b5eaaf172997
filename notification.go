package toolplane

import (
	"context"
	"time"
)

// ChannelKind says how a notification channel reaches people.
type ChannelKind string

// The notification channel kinds.
const (
	// ChannelWebhook POSTs a JSON document signed with HMAC-SHA256.
	ChannelWebhook ChannelKind = "webhook"
	// ChannelSlack posts a message to Slack: through the Web API's
	// chat.postMessage with a bot token when the channel holds one (the
	// message can then be updated once an approval is decided), else to a
	// Slack-compatible incoming webhook.
	ChannelSlack ChannelKind = "slack"
	// ChannelEmail sends a mail over SMTP.
	ChannelEmail ChannelKind = "email"
)

// NotificationChannel is where an organization's people are told that an
// approval needs them, or that a call went uncertain. A channel serves one
// approver group; the channels of the group "" are the organization's
// default, used for a group that has none of its own and for events that
// belong to no group.
type NotificationChannel struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	// Name is an administrator's label, unique in the organization.
	Name string `json:"name"`
	// Group is the approver group the channel serves; "" the default.
	Group  string        `json:"group"`
	Kind   ChannelKind   `json:"kind"`
	Config ChannelConfig `json:"config"`
	// Secret is the sealed secret material (the HMAC key, the Slack URL,
	// the SMTP password): never rendered, never answered.
	Secret []byte `json:"-"`
	// Secondary, when set, is the ID of the channel of the same
	// organization tried when a delivery on this one is given up.
	Secondary string    `json:"secondary,omitempty"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

// ChannelConfig is a channel's settings that are not secret.
type ChannelConfig struct {
	// URL is a webhook's endpoint. A Slack URL is itself the credential,
	// and is kept sealed instead.
	URL string `json:"url,omitempty"`
	// SMTP server and envelope of an email channel.
	Host     string   `json:"host,omitempty"`
	Port     int      `json:"port,omitempty"`
	From     string   `json:"from,omitempty"`
	To       []string `json:"to,omitempty"`
	Username string   `json:"username,omitempty"`
	// CAPEM, when set, is the PEM of the certificate authorities the SMTP
	// server's certificate is checked against instead of the system's.
	CAPEM string `json:"ca_pem,omitempty"`
	// Insecure lets an email channel talk without STARTTLS, to a server on
	// a loopback address only: an operator's explicit choice for a local
	// relay.
	Insecure bool `json:"insecure,omitempty"`
	// SlackChannel is the Slack conversation (C0123…) a Slack channel
	// with a bot token posts to.
	SlackChannel string `json:"slack_channel,omitempty"`
	// SlackTeam, when set, is the only Slack workspace (T0123…) whose
	// button presses the channel's interactivity endpoint accepts.
	SlackTeam string `json:"slack_team,omitempty"`
}

// ChannelSecrets is a channel's secret material in clear, held while a
// message is sent.
type ChannelSecrets struct {
	// HMACKey signs a webhook's requests.
	HMACKey SecretString `json:"hmac_key,omitempty"`
	// SlackURL is a Slack incoming webhook's address.
	SlackURL SecretString `json:"slack_url,omitempty"`
	// Password is the SMTP password.
	Password SecretString `json:"password,omitempty"`
	// SlackBotToken (xoxb-…) posts and updates a Slack channel's messages
	// through the Web API.
	SlackBotToken SecretString `json:"slack_bot_token,omitempty"`
	// SlackSigningSecret verifies the requests Slack sends to the
	// channel's interactivity endpoint (a button pressed).
	SlackSigningSecret SecretString `json:"slack_signing_secret,omitempty"`
}

// DeliveryState is where a notification's delivery on one channel ended.
type DeliveryState string

// The delivery states kept.
const (
	DeliveryDelivered DeliveryState = "delivered"
	// DeliveryDead: every attempt failed; the delivery was given up (the
	// dead-letter list).
	DeliveryDead DeliveryState = "dead"
)

// NotificationDelivery records how one event's notification on one channel
// ended. Event, Subject and ChannelID are its identity in the
// organization: one row per event, subject and channel.
type NotificationDelivery struct {
	OrganizationID string `json:"organization_id"`
	// Event is the event's kind (approval_filed, call_uncertain, ...).
	Event string `json:"event"`
	// Subject names what the event is about: an approval's ID, or an
	// uncertain claim's tool and key.
	Subject   string        `json:"subject"`
	ChannelID string        `json:"channel_id"`
	State     DeliveryState `json:"state"`
	Attempts  int           `json:"attempts"`
	// Error is the last attempt's failure, as the sender told it (never
	// holding a secret).
	Error     string    `json:"error,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NotificationStore is the storage of notification channels, of how
// deliveries ended, and of the one-click links already used. Every method
// is scoped to one organization but for the sweeps', which cross them.
type NotificationStore interface {
	// InsertNotificationChannel stores c, or answers an error wrapping
	// ErrExists when the organization holds a channel with its ID or
	// name.
	InsertNotificationChannel(ctx context.Context, c *NotificationChannel) error
	// GetNotificationChannel answers the channel, or ErrNotFound.
	GetNotificationChannel(ctx context.Context, org, id string) (*NotificationChannel, error)
	// ListNotificationChannels answers the organization's channels by
	// name; an organization has a handful.
	ListNotificationChannels(ctx context.Context, org string) ([]NotificationChannel, error)
	// DeleteNotificationChannel removes the channel and reports whether
	// it did.
	DeleteNotificationChannel(ctx context.Context, org, id string) (bool, error)
	// RecordDelivery stores d, replacing the row of the same event,
	// subject and channel.
	RecordDelivery(ctx context.Context, d *NotificationDelivery) error
	// GetDelivery answers the row of that event, subject and channel, or
	// ErrNotFound.
	GetDelivery(ctx context.Context, org, event, subject, channel string) (*NotificationDelivery, error)
	// ListDeliveries answers the organization's deliveries in a state,
	// most recently updated first, at most limit (1..1000).
	ListDeliveries(ctx context.Context, org string, state DeliveryState, limit int) ([]NotificationDelivery, error)
	// UseLinkNonce records the one-click link nonce as used, until
	// expires, or answers an error wrapping ErrExists when it was used
	// already.
	UseLinkNonce(ctx context.Context, org, nonce string, expires time.Time) error
	// DeleteExpiredLinkNonces removes up to limit used nonces, of any
	// organization, whose links expired before now, and answers how many.
	DeleteExpiredLinkNonces(ctx context.Context, now time.Time, limit int) (int, error)
	// ChannelsAfter answers channels of every organization after the
	// channel (afterOrg, afterID), ordered by organization then ID, at
	// most limit: the operator's walk when the key-encryption key
	// changes.
	ChannelsAfter(ctx context.Context, afterOrg, afterID string, limit int) ([]NotificationChannel, error)
	// ReplaceChannelSecret sets the channel's Secret to next where it
	// still holds prev, and reports whether it did: rewrapping a sealed
	// secret never overwrites one changed meanwhile.
	ReplaceChannelSecret(ctx context.Context, org, id string, prev, next []byte) (bool, error)
	// ApprovalsSince answers approvals of every organization created or
	// resolved at or after since, ordered by the later of the two
	// (ChangedAt), oldest first, at most limit: what the notification
	// sweep looks over, page after page.
	ApprovalsSince(ctx context.Context, since time.Time, limit int) ([]Approval, error)
	// UncertainClaimsSince answers uncertain claims of every organization
	// updated at or after since, by UpdatedAt, oldest first, at most
	// limit.
	UncertainClaimsSince(ctx context.Context, since time.Time, limit int) ([]Claim, error)
}
