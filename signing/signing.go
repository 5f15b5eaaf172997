// Package signing keeps each organization's callback signing secret: the
// secret toolplane signs the requests it sends to the organization's own
// receivers with (an async call's result sent to its callback URL), by
// the webhook package's scheme.
//
// An organization has one current secret, made on first use. An
// administrator rotates it: the new secret is answered once, in clear,
// and never again; the one it replaces keeps signing beside it for a
// grace period (Config.Grace, a day by default), so a receiver updating
// its copy refuses nothing in between, and is dropped afterwards. A
// rotation within the grace of the one before drops the older secret at
// once: at most two secrets sign at a time.
//
// Secrets are sealed with the deployment's keyring at rest, for their
// organization and ID, so sealed bytes copied to another organization's
// row do not open there. Nothing here logs, audits or answers a secret
// but Rotate's one answer; Info says when, never what.
package signing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/webhook"
)

// DefaultGrace is how long a rotated-out secret keeps signing when
// Config.Grace is zero.
const DefaultGrace = 24 * time.Hour

// Prefix begins every secret, so a secret scanner (and a person) can tell
// one in a file or a log.
const Prefix = "tpwhs_"

// ErrNotAuthorized: the caller may not manage the callback signing
// secret.
var ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not allowed to manage the callback signing secret")

// MayRotate refuses a caller who may not rotate the organization's
// callback signing secret: a person holding platform_admin. Whoever holds
// it can sign what the organization's receivers trust.
func MayRotate(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin) {
		return toolplane.Refuse(by, ErrNotAuthorized, "rotating the callback signing secret needs the platform_admin role")
	}
	return nil
}

// MayRead refuses a caller who may not read the secret's metadata: a
// platform administrator or an auditor.
func MayRead(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, ErrNotAuthorized, "reading the callback signing secret's metadata needs the platform_admin or auditor role")
	}
	return nil
}

// Config is what Secrets is built from. Store and Keys are required.
type Config struct {
	Store toolplane.WebhookSecretStore
	Keys  *secret.Keyring
	// Grace is how long a rotated-out secret keeps signing; DefaultGrace
	// when zero.
	Grace time.Duration
	Now   func() time.Time
}

// Secrets keeps organizations' callback signing secrets. It is safe for
// concurrent use, on any number of nodes: every write is conditional on
// the version it read.
type Secrets struct {
	store toolplane.WebhookSecretStore
	keys  *secret.Keyring
	grace time.Duration
	now   func() time.Time
}

// New answers Secrets built from cfg.
func New(cfg Config) (*Secrets, error) {
	if cfg.Store == nil || cfg.Keys == nil {
		return nil, fmt.Errorf("%w: signing needs a store and a keyring", toolplane.ErrInvalid)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Secrets{store: cfg.Store, keys: cfg.Keys, grace: cfg.Grace, now: cfg.Now}, nil
}

// Info is what may be known of an organization's secret: which and
// when, never what.
type Info struct {
	// ID names the current secret; CreatedAt is when it was made.
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	// PreviousID names the secret that still signs beside the current
	// one, until PreviousValidUntil; empty when none does.
	PreviousID         string    `json:"previous_id,omitempty"`
	PreviousValidUntil time.Time `json:"previous_valid_until,omitzero"`
	// RotatedBy is who made the current secret; empty when it was made
	// on first use.
	RotatedBy string `json:"rotated_by,omitempty"`
}

// Rotated is Rotate's answer: the new secret in clear, the one time it is
// shown, and the secret's Info.
type Rotated struct {
	Info
	// Secret is the new secret. Its bytes, as text, are the HMAC key a
	// receiver verifies with. It marshals as a placeholder: an answer
	// that shows it reveals it on purpose.
	Secret toolplane.SecretString `json:"secret"`
}

// aad is what a secret is sealed for: its organization and its ID.
func aad(org, id string) []byte { return []byte("webhook-secret\x00" + org + "\x00" + id) }

// mint answers a new secret, its ID and its sealed form for org.
func (s *Secrets) mint(org string) (plain []byte, id string, sealed []byte, err error) {
	raw := make([]byte, 32)
	rand.Read(raw)
	plain = []byte(Prefix + hex.EncodeToString(raw))
	clear(raw)
	id = toolplane.NewID("whs_")
	sealed, err = s.keys.Seal(plain, aad(org, id))
	if err != nil {
		clear(plain)
		return nil, "", nil, fmt.Errorf("seal the callback signing secret: %w", err)
	}
	return plain, id, sealed, nil
}

// Rotate makes a new secret for the caller's organization and answers it,
// once; the current one keeps signing until the grace period has passed.
// An organization without a secret gets its first. Two rotations racing
// on one organization: one wins, the other answers an error wrapping
// toolplane.ErrConflict and changes nothing.
func (s *Secrets) Rotate(ctx context.Context, by *toolplane.Credential) (*Rotated, error) {
	if err := MayRotate(by); err != nil {
		return nil, err
	}
	org := by.OrganizationID
	plain, id, sealed, err := s.mint(org)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	now := s.now()
	next := &toolplane.WebhookSecret{OrganizationID: org, CurrentID: id, Current: sealed, CreatedAt: now, RotatedBy: by.Subject, Version: 1}
	cur, err := s.store.GetWebhookSecret(ctx, org)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		if err := s.store.InsertWebhookSecret(ctx, next); errors.Is(err, toolplane.ErrExists) {
			return nil, fmt.Errorf("rotate the callback signing secret: another rotation or first use made one meanwhile: %w", toolplane.ErrConflict)
		} else if err != nil {
			return nil, fmt.Errorf("rotate the callback signing secret: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("rotate the callback signing secret: %w", err)
	default:
		next.PreviousID, next.Previous, next.PreviousUntil, next.Version = cur.CurrentID, cur.Current, now.Add(s.grace), cur.Version
		ok, err := s.store.UpdateWebhookSecret(ctx, next)
		if err != nil {
			return nil, fmt.Errorf("rotate the callback signing secret: %w", err)
		}
		if !ok {
			return nil, fmt.Errorf("rotate the callback signing secret: it changed meanwhile (another rotation?): %w", toolplane.ErrConflict)
		}
	}
	return &Rotated{Info: s.info(next, now), Secret: toolplane.SecretString(plain)}, nil
}

// Info answers the metadata of the caller's organization's secret, or an
// error wrapping toolplane.ErrNotFound when it has none yet.
func (s *Secrets) Info(ctx context.Context, by *toolplane.Credential) (*Info, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	w, err := s.store.GetWebhookSecret(ctx, by.OrganizationID)
	if err != nil {
		return nil, fmt.Errorf("callback signing secret: %w", err)
	}
	info := s.info(w, s.now())
	return &info, nil
}

func (s *Secrets) info(w *toolplane.WebhookSecret, now time.Time) Info {
	i := Info{ID: w.CurrentID, CreatedAt: w.CreatedAt, RotatedBy: w.RotatedBy}
	if w.PreviousID != "" && now.Before(w.PreviousUntil) {
		i.PreviousID, i.PreviousValidUntil = w.PreviousID, w.PreviousUntil
	}
	return i
}

// Signing answers the keys org's requests are signed with now: the
// current secret first, then the previous one while its grace lasts. An
// organization without a secret gets one, made here. It is the sender's
// call (the system's, for an organization's own callback), so it checks
// no credential: the organization is the one whose request is signed.
// The caller clears the keys when done.
func (s *Secrets) Signing(ctx context.Context, org string) ([][]byte, error) {
	if org == "" {
		return nil, fmt.Errorf("%w: signing needs an organization", toolplane.ErrInvalid)
	}
	now := s.now()
	w, err := s.store.GetWebhookSecret(ctx, org)
	if errors.Is(err, toolplane.ErrNotFound) {
		w, err = s.first(ctx, org, now)
	}
	if err != nil {
		return nil, fmt.Errorf("callback signing secret of %s: %w", org, err)
	}
	cur, err := s.keys.Open(w.Current, aad(org, w.CurrentID))
	if err != nil {
		return nil, fmt.Errorf("open the callback signing secret of %s: %w", org, err)
	}
	keys := [][]byte{cur}
	switch {
	case w.PreviousID == "":
	case now.Before(w.PreviousUntil):
		prev, err := s.keys.Open(w.Previous, aad(org, w.PreviousID))
		if err != nil {
			clear(cur)
			return nil, fmt.Errorf("open the previous callback signing secret of %s: %w", org, err)
		}
		keys = append(keys, prev)
	default:
		// Its grace has passed: drop it. Losing this write to a
		// rotation is fine; the rotation replaced it anyway.
		dropped := *w
		dropped.PreviousID, dropped.Previous, dropped.PreviousUntil = "", nil, time.Time{}
		if _, err := s.store.UpdateWebhookSecret(ctx, &dropped); err != nil {
			clear(cur)
			return nil, fmt.Errorf("drop the expired callback signing secret of %s: %w", org, err)
		}
	}
	return keys, nil
}

// first makes org's first secret, or reads the one a concurrent first use
// made.
func (s *Secrets) first(ctx context.Context, org string, now time.Time) (*toolplane.WebhookSecret, error) {
	plain, id, sealed, err := s.mint(org)
	if err != nil {
		return nil, err
	}
	clear(plain)
	w := &toolplane.WebhookSecret{OrganizationID: org, CurrentID: id, Current: sealed, CreatedAt: now, Version: 1}
	err = s.store.InsertWebhookSecret(ctx, w)
	if errors.Is(err, toolplane.ErrExists) {
		return s.store.GetWebhookSecret(ctx, org)
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Headers answers the headers of a request to org's receiver carrying
// body for delivery, signed at now with every key Signing answers:
// X-Toolplane-Timestamp, X-Toolplane-Signature and X-Toolplane-Delivery.
// delivery is the same on every retry of one delivery.
func (s *Secrets) Headers(ctx context.Context, org, delivery string, body []byte, now time.Time) (http.Header, error) {
	if delivery == "" {
		return nil, fmt.Errorf("%w: a signed request needs a delivery id", toolplane.ErrInvalid)
	}
	keys, err := s.Signing(ctx, org)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, k := range keys {
			clear(k)
		}
	}()
	return webhook.Headers(keys, delivery, body, now), nil
}
