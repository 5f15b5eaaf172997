package notify

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// Errors a one-click link is refused with. None says more than the kind
// of refusal: a forger learns nothing of what would have passed.
var (
	ErrLinkInvalid = toolplane.Refine(toolplane.ErrForbidden, "link not valid")
	ErrLinkExpired = toolplane.Refine(toolplane.ErrForbidden, "link expired")
	ErrLinkUsed    = toolplane.Refine(toolplane.ErrConflict, "link already used")
)

// linkPurpose names the derived key links are signed with.
const linkPurpose = "toolplane notify link v1"

// DefaultLinkTTL is how long a link works unless configured.
const DefaultLinkTTL = 24 * time.Hour

// maxToken bounds a token read from a URL.
const maxToken = 2048

// Link is what a token binds.
type Link struct {
	// Key is the keyring's key id the token's signing key derives from.
	Key          string `json:"k"`
	Organization string `json:"o"`
	Approval     string `json:"a"`
	// Channel is the channel the link was sent on.
	Channel string `json:"c"`
	// Expires is a Unix time in seconds.
	Expires int64  `json:"e"`
	Nonce   string `json:"n"`
}

// KeyID answers the keyring key the link's signing key derives from.
func (l *Link) KeyID() string { return l.Key }

// LinkStore keeps the nonces of used links.
type LinkStore interface {
	UseLinkNonce(ctx context.Context, org, nonce string, expires time.Time) error
}

// Links signs and checks one-click links. It is safe for concurrent use.
type Links struct {
	keys  *secret.Keyring
	store LinkStore
	ttl   time.Duration
	now   func() time.Time
}

// NewLinks answers a signer under keys' derived link key, recording used
// nonces in store.
func NewLinks(keys *secret.Keyring, store LinkStore, ttl time.Duration, now func() time.Time) (*Links, error) {
	if keys == nil || store == nil {
		return nil, fmt.Errorf("%w: links need a keyring and a store", toolplane.ErrInvalid)
	}
	if ttl <= 0 {
		ttl = DefaultLinkTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Links{keys: keys, store: store, ttl: ttl, now: now}, nil
}

// Sign answers a token for the organization's approval, sent on channel,
// that works until the earlier of the signer's lifetime and until (when
// not zero).
func (l *Links) Sign(org, approvalID, channel string, until time.Time) (string, error) {
	exp := l.now().Add(l.ttl)
	if !until.IsZero() && until.Before(exp) {
		exp = until
	}
	link := Link{Key: l.keys.Current(), Organization: org, Approval: approvalID, Channel: channel,
		Expires: exp.Unix(), Nonce: rand.Text()}
	return l.keys.SignToken(linkPurpose, &link)
}

// Parse verifies a token's signature and expiry, and answers what it
// binds. It does not consume the link.
func (l *Links) Parse(token string) (*Link, error) {
	var link Link
	if err := l.keys.OpenToken(linkPurpose, token, maxToken, &link); errors.Is(err, secret.ErrToken) {
		return nil, ErrLinkInvalid
	} else if err != nil {
		return nil, fmt.Errorf("check link: %w", err)
	}
	if link.Organization == "" || link.Approval == "" || link.Nonce == "" {
		return nil, ErrLinkInvalid
	}
	if !l.now().Before(time.Unix(link.Expires, 0)) {
		return nil, ErrLinkExpired
	}
	return &link, nil
}

// Check verifies token for the approval approvalID: its signature, its
// expiry, and that it was signed for that approval. A link that checks may
// still have been used; Use tells.
func (l *Links) Check(token, approvalID string) error {
	_, err := l.check(token, approvalID)
	return err
}

func (l *Links) check(token, approvalID string) (*Link, error) {
	link, err := l.Parse(token)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal([]byte(link.Approval), []byte(approvalID)) {
		return nil, ErrLinkInvalid
	}
	return link, nil
}

// Use checks token for approvalID, as Check does, and consumes it: the
// first use succeeds, every later one answers ErrLinkUsed.
func (l *Links) Use(ctx context.Context, token, approvalID string) error {
	link, err := l.check(token, approvalID)
	if err != nil {
		return err
	}
	err = l.store.UseLinkNonce(ctx, link.Organization, link.Nonce, time.Unix(link.Expires, 0))
	if errors.Is(err, toolplane.ErrExists) {
		return ErrLinkUsed
	}
	if err != nil {
		return fmt.Errorf("use link: %w", err)
	}
	return nil
}
