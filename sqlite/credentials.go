package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanCredential(r scanner) (toolplane.Credential, error) {
	var (
		c                          toolplane.Credential
		roles, tools, attrs        string
		created                    int64
		expires, revoked, lastUsed sql.NullInt64
	)
	err := r.Scan(&c.ID, &c.OrganizationID, &c.Kind, &c.Subject, &roles, &tools, &c.Hash, &c.Label,
		&created, &expires, &revoked, &lastUsed, &c.CreatedBy, &c.Version, &attrs, &c.Listing, &c.ListingTop)
	if err != nil {
		return c, err
	}
	if c.Attributes, err = fromAttributes([]byte(attrs)); err != nil {
		return c, fmt.Errorf("attributes: %w", err)
	}
	if c.Roles, err = fromNames(roles); err != nil {
		return c, fmt.Errorf("roles: %w", err)
	}
	if c.Tools, err = fromNames(tools); err != nil {
		return c, fmt.Errorf("tools: %w", err)
	}
	c.CreatedAt = fromMicros(created)
	c.ExpiresAt = fromOptMicros(expires)
	c.RevokedAt = fromOptMicros(revoked)
	c.LastUsedAt = fromOptMicros(lastUsed)
	return c, nil
}

// names answers a list of role or tool names as its column holds it: a JSON
// array of strings, "[]" when empty. A name that is not UTF-8 text without
// NUL is refused: JSON would rewrite invalid UTF-8, and the PostgreSQL store
// cannot hold either, so refusing keeps every name byte for byte and the
// stores alike.
func names(field string, list []string) (string, error) {
	if len(list) == 0 {
		return "[]", nil
	}
	for i, n := range list {
		if !utf8.ValidString(n) || strings.IndexByte(n, 0) >= 0 {
			return "", fmt.Errorf("%s[%d] %q is not UTF-8 text without NUL", field, i, n)
		}
	}
	b, err := json.Marshal(list)
	return string(b), err
}

// fromNames answers a names column's list, nil when empty.
func fromNames(s string) ([]string, error) {
	var list []string
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, nil
	}
	return list, nil
}

// InsertCredential stores c, or answers an error wrapping
// toolplane.ErrExists when a credential with its ID exists in any
// organization.
func (s *Store) InsertCredential(ctx context.Context, c *toolplane.Credential) error {
	args, err := credentialArgs(c)
	if err != nil {
		return fmt.Errorf("insert credential %s: %w", c.ID, err)
	}
	_, err = s.exec(ctx, insertCredential, args...)
	if isDuplicate(err) {
		return fmt.Errorf("insert credential %s: %w", c.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert credential %s: %w", c.ID, err)
	}
	return nil
}

// InsertCredentialAudited is InsertCredential and AppendAudit in one
// transaction: a credential whose event cannot be stored is not stored
// either.
func (s *Store) InsertCredentialAudited(ctx context.Context, c *toolplane.Credential, e *toolplane.AuditEvent) error {
	args, err := credentialArgs(c)
	if err != nil {
		return fmt.Errorf("insert credential %s: %w", c.ID, err)
	}
	_, err = s.audited(ctx, nil, e, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return inserted(s.txExec(ctx, tx, insertCredential, args...))
	})
	if err != nil {
		return fmt.Errorf("insert credential %s: %w", c.ID, err)
	}
	return nil
}

const insertCredential = `INSERT INTO credentials (` + credentialColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// credentialArgs answers insertCredential's arguments for c, or why c
// cannot be stored.
func credentialArgs(c *toolplane.Credential) ([]any, error) {
	roles, err := names("roles", c.Roles)
	if err != nil {
		return nil, err
	}
	tools, err := names("tools", c.Tools)
	if err != nil {
		return nil, err
	}
	attrs, err := attributes(c.Attributes)
	if err != nil {
		return nil, err
	}
	if err := listing(c); err != nil {
		return nil, err
	}
	return []any{c.ID, c.OrganizationID, string(c.Kind), c.Subject, roles, tools, blob(c.Hash), c.Label,
		micros(c.CreatedAt), optMicros(c.ExpiresAt), optMicros(c.RevokedAt), optMicros(c.LastUsedAt), c.CreatedBy, c.Version, string(attrs),
		string(c.Listing), c.ListingTop}, nil
}

// GetCredential answers the credential with that ID, in whichever
// organization holds it, or an error wrapping toolplane.ErrNotFound.
func (s *Store) GetCredential(ctx context.Context, id string) (*toolplane.Credential, error) {
	row := s.queryRow(ctx, `SELECT `+credentialColumns+` FROM credentials WHERE id = ?`, id)
	c, err := scanCredential(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get credential %s: %w", id, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get credential %s: %w", id, err)
	}
	return &c, nil
}

// ListCredentials answers the organization's credentials, oldest first
// (ties by ID), after the cursor. The next cursor is "" when no credential
// follows.
func (s *Store) ListCredentials(ctx context.Context, org, after string, limit int) ([]toolplane.Credential, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListCredentials(&q, dialect, org, after, limit)
	return page(ctx, s, "list credentials", &q, err, limit, scanCredential, sqlstore.CredentialCursor)
}

// UpdateCredential writes c's roles, tools, label, expiry, revocation and
// tool listing where the stored organization, ID and version are c's, in
// one conditional statement, and on success sets c.Version to the new
// version. A stored revocation is kept (COALESCE), and nothing else is
// written.
func (s *Store) UpdateCredential(ctx context.Context, c *toolplane.Credential) (bool, error) {
	defer s.oauthChanged(c.OrganizationID, c.ID)
	args, err := updateCredentialArgs(c)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	res, err := s.exec(ctx, updateCredential, args...)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	if ok {
		c.Version++
	}
	return ok, nil
}

// UpdateCredentialAudited is UpdateCredential and AppendAudit in one
// transaction; a stale version stores neither, and an event that cannot
// be stored updates nothing. c.Version moves only when both are stored.
func (s *Store) UpdateCredentialAudited(ctx context.Context, c *toolplane.Credential, e *toolplane.AuditEvent) (bool, error) {
	defer s.oauthChanged(c.OrganizationID, c.ID)
	args, err := updateCredentialArgs(c)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	ok, err := s.audited(ctx, nil, e, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		res, err := s.txExec(ctx, tx, updateCredential, args...)
		if err != nil {
			return false, err
		}
		return affected(res)
	})
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	if ok {
		c.Version++
	}
	return ok, nil
}

const updateCredential = `UPDATE credentials SET
			roles = ?, tools = ?, label = ?, expires_at = ?,
			revoked_at = COALESCE(revoked_at, ?),
			listing = ?, listing_top = ?,
			version = version + 1
		WHERE organization_id = ? AND id = ? AND version = ?`

// updateCredentialArgs answers updateCredential's arguments for c, or why
// c cannot be stored.
func updateCredentialArgs(c *toolplane.Credential) ([]any, error) {
	roles, err := names("roles", c.Roles)
	if err != nil {
		return nil, err
	}
	tools, err := names("tools", c.Tools)
	if err != nil {
		return nil, err
	}
	if err := listing(c); err != nil {
		return nil, err
	}
	return []any{roles, tools, c.Label, optMicros(c.ExpiresAt), optMicros(c.RevokedAt),
		string(c.Listing), c.ListingTop, c.OrganizationID, c.ID, c.Version}, nil
}

// TouchCredential sets the credential's last use to at unless the stored one
// is later, in one statement that neither reads first nor bumps the
// version. SQLite counts a row the WHERE clause matched as changed even when
// the CASE keeps its value, so no change means no such credential in org.
func (s *Store) TouchCredential(ctx context.Context, org, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("touch credential %s: zero time", id)
	}
	t := micros(at)
	res, err := s.exec(ctx, `UPDATE credentials SET
			last_used_at = CASE WHEN last_used_at >= ? THEN last_used_at ELSE ? END
		WHERE organization_id = ? AND id = ?`, t, t, org, id)
	if err != nil {
		return fmt.Errorf("touch credential %s: %w", id, err)
	}
	ok, err := affected(res)
	if err != nil {
		return fmt.Errorf("touch credential %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("touch credential %s: %w", id, toolplane.ErrNotFound)
	}
	return nil
}

// attributes answers a credential's attributes as their column holds
// them: a JSON object, "{}" when there are none.
func attributes(a map[string]any) ([]byte, error) {
	if len(a) == 0 {
		return []byte("{}"), nil
	}
	return json.Marshal(a)
}

// fromAttributes answers an attributes column's object, nil when empty.
func fromAttributes(b []byte) (map[string]any, error) {
	var a map[string]any
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, err
	}
	if len(a) == 0 {
		return nil, nil
	}
	return a, nil
}

// listing refuses a tool listing the credentials table does not hold,
// saying which, rather than leaving it to the column's check.
func listing(c *toolplane.Credential) error {
	if !c.Listing.Valid() {
		return fmt.Errorf("listing %q is not full, meta or hybrid", c.Listing)
	}
	if c.ListingTop < 0 || c.ListingTop > toolplane.MaxListingTop {
		return fmt.Errorf("listing top %d is not between 0 and %d", c.ListingTop, toolplane.MaxListingTop)
	}
	return nil
}
