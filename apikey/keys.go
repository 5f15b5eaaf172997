package apikey

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
)

// Errors of the key service beside its refusals (*toolplane.DeniedError
// wrapping ErrNotAuthorized) and toolplane.ErrNotFound.
var (
	// ErrNotAuthorized: the caller's roles do not allow the operation on
	// keys.
	ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not authorized to manage keys")
	// ErrNotStored: the store refused the new credential as not
	// acceptable (a toolplane.ErrInvalid from the store: a value it cannot
	// hold). A store that does not answer is not this: Create answers its
	// error as it is, a platform fault.
	ErrNotStored = errors.New("the key could not be stored")
	// ErrChanged: the credential changed while it was being revoked.
	ErrChanged = toolplane.Refine(toolplane.ErrConflict, "the key changed meanwhile")
)

// InvalidError is a key request that cannot be minted: Field is the
// request's part at fault (a JSON pointer, "/kind"), Why says what it
// must be.
type InvalidError struct {
	Field, Why string
}

func (e *InvalidError) Error() string { return e.Why }

// Unwrap answers toolplane.ErrInvalid, the kind of the error.
func (e *InvalidError) Unwrap() error { return toolplane.ErrInvalid }

// Keys mints, lists and revokes the API keys of an organization, each
// operation authorized from the credential of the person asking, so every
// door (REST, the console, the CLI through REST) applies the same rules:
// a platform_admin mints and revokes, an auditor may list too.
type Keys struct {
	store  toolplane.CredentialStore
	cache  *Cache
	now    func() time.Time
	settle time.Duration
}

// KeysConfig wires a Keys service.
type KeysConfig struct {
	Store toolplane.CredentialStore
	// Cache, when set, is the node's cache of verified keys, which a
	// revocation clears so that this node refuses the key at once.
	Cache *Cache
	Now   func() time.Time
	// Settle is how long a change to a key takes to reach every node
	// through the store's change feed (toolplane.ChangeFeed): each node
	// keeps the OAuth consents a person's key backs, and drops them when
	// the feed tells it the key changed. Revoking a person's key answers
	// after it, so every node refuses those consents at its next call.
	// Zero takes the store's ChangeSettle when the store has a feed.
	Settle time.Duration
}

// NewKeys answers a key service.
func NewKeys(cfg KeysConfig) *Keys {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if feed, ok := cfg.Store.(toolplane.ChangeFeed); ok && cfg.Settle == 0 {
		cfg.Settle = feed.ChangeSettle()
	}
	return &Keys{store: cfg.Store, cache: cfg.Cache, now: cfg.Now, settle: cfg.Settle}
}

// MayManage refuses a caller who may not mint or revoke keys: a
// platform_admin does.
func MayManage(by *toolplane.Credential, what string) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin) {
		return toolplane.Refuse(by, ErrNotAuthorized, what+" needs the platform_admin role")
	}
	return nil
}

// MayList refuses a caller who may not list keys: a platform_admin or an
// auditor does.
func MayList(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, ErrNotAuthorized, "listing keys needs the platform_admin or auditor role")
	}
	return nil
}

// NewKey is a key to mint.
type NewKey struct {
	Kind    toolplane.CredentialKind
	Subject string
	// Roles are a person's roles; an agent's key holds at most
	// toolplane.RoleActForUsers.
	Roles []string
	// Tools narrow an agent's key to tool names or glob patterns.
	Tools     []string
	Label     string
	ExpiresAt time.Time
	// Attributes are what the organization's rules read of the caller
	// (principal.attributes; "team" is its team): at most MaxAttributes
	// names of lowercase letters, digits and underscores, each to a text.
	Attributes map[string]string
	// Listing is how the MCP endpoint lists an agent key's tools (full
	// when empty), and ListingTop a hybrid listing's number of most-used
	// tools (toolplane.DefaultListingTop when zero).
	Listing    toolplane.ToolListing
	ListingTop int
}

// MaxAttributes bounds the attributes a key carries.
const MaxAttributes = 16

// check answers what is wrong with k: an *InvalidError, or a
// *toolplane.TooLongError for a part past its bound.
func (k *NewKey) check() error {
	switch {
	case k.Kind != toolplane.CredentialAgent && k.Kind != toolplane.CredentialPerson:
		return &InvalidError{Field: "/kind", Why: `kind must be "agent" or "person"`}
	case k.Subject == "":
		return &InvalidError{Field: "/subject", Why: "subject names the agent identity or the person"}
	case k.Kind == toolplane.CredentialAgent && (len(k.Roles) > 1 || len(k.Roles) == 1 && k.Roles[0] != toolplane.RoleActForUsers):
		return &InvalidError{Field: "/roles", Why: "an agent's key carries tools, and no role but " + toolplane.RoleActForUsers}
	case k.Kind == toolplane.CredentialPerson && len(k.Tools) > 0:
		return &InvalidError{Field: "/tools", Why: "a person's key carries roles, not tools"}
	case k.Kind == toolplane.CredentialPerson && (k.Listing != "" || k.ListingTop != 0):
		return &InvalidError{Field: "/listing", Why: "a person's key calls no tools, so it has no tool listing"}
	}
	if err := checkListing(k.Listing, k.ListingTop); err != nil {
		return err
	}
	checks := []error{toolplane.CheckLen("subject", k.Subject, toolplane.MaxRefLen), toolplane.CheckLen("label", k.Label, toolplane.MaxRefLen)}
	for i, v := range k.Roles {
		checks = append(checks, toolplane.CheckLen(fmt.Sprintf("roles[%d]", i), v, toolplane.MaxRefLen))
	}
	for i, v := range k.Tools {
		checks = append(checks, toolplane.CheckLen(fmt.Sprintf("tools[%d]", i), v, toolplane.MaxNameLen))
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	// Text a store cannot hold (a NUL byte, bytes that are not UTF-8) is
	// refused here, at its field, so the store's refusal is never the
	// caller's only answer.
	texts := []struct{ field, v string }{{"/subject", k.Subject}, {"/label", k.Label}}
	for i, v := range k.Roles {
		texts = append(texts, struct{ field, v string }{fmt.Sprintf("/roles/%d", i), v})
	}
	for i, v := range k.Tools {
		texts = append(texts, struct{ field, v string }{fmt.Sprintf("/tools/%d", i), v})
	}
	for _, t := range texts {
		if !utf8.ValidString(t.v) || strings.ContainsRune(t.v, 0) {
			return &InvalidError{Field: t.field, Why: t.field[1:] + " is plain text: UTF-8 without NUL bytes"}
		}
	}
	if len(k.Attributes) > MaxAttributes {
		return &InvalidError{Field: "/attributes", Why: fmt.Sprintf("a key carries at most %d attributes", MaxAttributes)}
	}
	for name, v := range k.Attributes {
		if !attributeName(name) {
			return &InvalidError{Field: "/attributes", Why: fmt.Sprintf("attribute name %q is not 1 to 64 lowercase letters, digits and underscores, starting with a letter", name)}
		}
		if err := toolplane.CheckLen("attributes."+name, v, toolplane.MaxRefLen); err != nil {
			return err
		}
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return &InvalidError{Field: "/attributes/" + name, Why: "attributes." + name + " is plain text: UTF-8 without NUL bytes"}
		}
	}
	for i, p := range k.Tools {
		// A pattern that cannot match would narrow the key to nothing,
		// silently: refuse it where it is written.
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return &InvalidError{Field: fmt.Sprintf("/tools/%d", i), Why: fmt.Sprintf("tools[%d] %q is not a tool name or glob pattern", i, p)}
		}
	}
	return nil
}

// checkListing answers what is wrong with a tool listing and its number
// of most-used tools.
func checkListing(l toolplane.ToolListing, top int) error {
	switch {
	case !l.Valid():
		return &InvalidError{Field: "/listing", Why: `listing must be "full", "meta" or "hybrid"`}
	case top != 0 && l != toolplane.ListingHybrid:
		return &InvalidError{Field: "/listing_top", Why: "listing_top is the number of most-used tools a hybrid listing shows; set it only with listing hybrid"}
	case top < 0 || top > toolplane.MaxListingTop:
		return &InvalidError{Field: "/listing_top", Why: fmt.Sprintf("listing_top must be between 1 and %d (0 or absent: %d)", toolplane.MaxListingTop, toolplane.DefaultListingTop)}
	}
	return nil
}

// attributeName reports whether name may name a key's attribute: a rule
// reads it as principal.attributes.<name>, in Cedar and in Rego alike.
func attributeName(name string) bool {
	if name == "" || len(name) > 64 || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// Create mints a key for k in the caller's organization, recorded as
// minted by the caller, who must be a platform_admin. It answers the key,
// which is shown once and stored only as a hash, and its credential.
func (s *Keys) Create(ctx context.Context, k NewKey, by *toolplane.Credential) (key string, cred *toolplane.Credential, err error) {
	if err := MayManage(by, "creating keys"); err != nil {
		return "", nil, err
	}
	if err := k.check(); err != nil {
		return "", nil, err
	}
	id, secret, err := New(k.Kind)
	if err != nil {
		return "", nil, fmt.Errorf("mint a key: %w", err)
	}
	cred = &toolplane.Credential{ID: id, OrganizationID: by.OrganizationID, Kind: k.Kind, Subject: k.Subject,
		Roles: k.Roles, Tools: k.Tools, Hash: Hash(secret), Label: k.Label, CreatedAt: s.now(),
		ExpiresAt: k.ExpiresAt, CreatedBy: by.Subject, Listing: k.Listing, ListingTop: k.ListingTop}
	if len(k.Attributes) > 0 {
		cred.Attributes = make(map[string]any, len(k.Attributes))
		for name, v := range k.Attributes {
			cred.Attributes[name] = v
		}
	}
	// The key and its audit event are stored together or not at all: a
	// key nobody can account for never exists, and its secret is shown
	// only once both are stored.
	if err := s.store.InsertCredentialAudited(ctx, cred, s.event(by, "created", cred)); err != nil {
		if errors.Is(err, toolplane.ErrInvalid) {
			return "", nil, fmt.Errorf("%w: %w", ErrNotStored, err)
		}
		// An outage is the platform's, never the caller's bad request.
		return "", nil, fmt.Errorf("store key %s: %w", id, err)
	}
	return Key(id, secret), cred, nil
}

// List answers the caller's organization's credentials (revoked and
// expired included, never a secret), after the cursor, to a platform_admin
// or an auditor.
func (s *Keys) List(ctx context.Context, after string, limit int, by *toolplane.Credential) ([]toolplane.Credential, string, error) {
	if err := MayList(by); err != nil {
		return nil, "", err
	}
	cs, next, err := s.store.ListCredentials(ctx, by.OrganizationID, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list keys: %w", err)
	}
	return cs, next, nil
}

// Revoke revokes the key id of the caller's organization, for a
// platform_admin; revoking a revoked key answers it as it is. Another
// organization's key is not found (toolplane.ErrNotFound), so its
// existence is not disclosed. This node refuses the key from the moment
// Revoke answers; other nodes within their cache's time to live.
func (s *Keys) Revoke(ctx context.Context, id string, by *toolplane.Credential) (*toolplane.Credential, error) {
	if err := MayManage(by, "revoking keys"); err != nil {
		return nil, err
	}
	if err := toolplane.CheckLen("key id", id, toolplane.MaxRefLen); err != nil {
		return nil, err
	}
	cred, err := s.store.GetCredential(ctx, id)
	if err == nil && cred.OrganizationID != by.OrganizationID {
		err = toolplane.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("revoke key %s: %w", id, err)
	}
	if cred.RevokedAt.IsZero() {
		// Only the revocation that takes effect is recorded, in its own
		// transaction: revoking a revoked key changes nothing.
		cred.RevokedAt = s.now()
		ok, err := s.store.UpdateCredentialAudited(ctx, cred, s.event(by, "revoked", cred))
		if err != nil {
			return nil, fmt.Errorf("revoke key %s: %w: %w", id, ErrChanged, err)
		}
		if !ok {
			return nil, fmt.Errorf("revoke key %s: %w", id, ErrChanged)
		}
	}
	s.cache.Forget(cred.ID)
	if cred.Kind == toolplane.CredentialPerson {
		// Found revoked too: the revocation may be another request's,
		// not settled yet.
		s.waitSettle(ctx)
	}
	return cred, nil
}

// SetListing changes how the MCP endpoint lists the tools of the agent key
// id of the caller's organization (see toolplane.ToolListing), for a
// platform_admin: the change and its audit event are stored together.
// Another organization's key is not found (toolplane.ErrNotFound); a
// revoked key is refused, since nothing it lists is called again. This
// node's sessions of the key follow at their next request; other nodes'
// within their key cache's time to live.
func (s *Keys) SetListing(ctx context.Context, id string, l toolplane.ToolListing, top int, by *toolplane.Credential) (*toolplane.Credential, error) {
	if err := MayManage(by, "changing keys"); err != nil {
		return nil, err
	}
	if err := toolplane.CheckLen("key id", id, toolplane.MaxRefLen); err != nil {
		return nil, err
	}
	if err := checkListing(l, top); err != nil {
		return nil, err
	}
	cred, err := s.store.GetCredential(ctx, id)
	if err == nil && cred.OrganizationID != by.OrganizationID {
		err = toolplane.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("change key %s: %w", id, err)
	}
	switch {
	case cred.Kind != toolplane.CredentialAgent:
		return nil, &InvalidError{Field: "/listing", Why: "a person's key calls no tools, so it has no tool listing"}
	case !cred.RevokedAt.IsZero():
		return nil, &InvalidError{Field: "/listing", Why: "the key is revoked"}
	case cred.Listing == l && cred.ListingTop == top:
		// Nothing changes, so nothing is recorded.
		return cred, nil
	}
	cred.Listing, cred.ListingTop = l, top
	ev := s.event(by, "listing_changed", cred)
	mode, n := cred.ToolListing()
	ev.Reason += "; tools listed: " + string(mode)
	if mode == toolplane.ListingHybrid {
		ev.Reason += fmt.Sprintf(" (%d most used)", n)
	}
	ok, err := s.store.UpdateCredentialAudited(ctx, cred, ev)
	if err != nil {
		return nil, fmt.Errorf("change key %s: %w", id, err)
	}
	if !ok {
		return nil, fmt.Errorf("change key %s: %w", id, ErrChanged)
	}
	s.cache.Forget(cred.ID)
	return cred, nil
}

// waitSettle waits the change feed's settle time, or until ctx ends: by
// then every node has heard of the change, or trusts nothing it kept.
func (s *Keys) waitSettle(ctx context.Context) {
	if s.settle <= 0 {
		return
	}
	t := time.NewTimer(s.settle)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// event answers the audit event of by's change to the key cred: its ID
// as the subject, what it authenticates as the reason, never its secret
// or hash. The store writes it in the change's transaction.
func (s *Keys) event(by *toolplane.Credential, outcome string, cred *toolplane.Credential) *toolplane.AuditEvent {
	ev := toolplane.ControlEvent(by, toolplane.AuditKey, outcome, cred.ID, s.now())
	ev.Reason = string(cred.Kind) + " " + cred.Subject
	return ev
}
