package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

func scanCredential(r scanner) (toolplane.Credential, error) {
	var (
		c                          toolplane.Credential
		created                    int64
		expires, revoked, lastUsed *int64
		attrs                      []byte
	)
	err := r.Scan(&c.ID, &c.OrganizationID, &c.Kind, &c.Subject, &c.Roles, &c.Tools, &c.Hash, &c.Label,
		&created, &expires, &revoked, &lastUsed, &c.CreatedBy, &c.Version, &attrs, &c.Listing, &c.ListingTop)
	if err != nil {
		return c, err
	}
	if c.Attributes, err = fromAttributes(attrs); err != nil {
		return c, fmt.Errorf("attributes: %w", err)
	}
	if len(c.Roles) == 0 {
		c.Roles = nil
	}
	if len(c.Tools) == 0 {
		c.Tools = nil
	}
	c.CreatedAt = fromMicros(created)
	c.ExpiresAt = fromOptMicros(expires)
	c.RevokedAt = fromOptMicros(revoked)
	c.LastUsedAt = fromOptMicros(lastUsed)
	return c, err
}

// names answers a list of role or tool names as its TEXT[] column takes it:
// never nil, which pgx would send as NULL. A name that is not UTF-8 text
// without NUL, which PostgreSQL text cannot hold, is refused here with an
// error that says which, rather than by the server.
func names(field string, list []string) ([]string, error) {
	if len(list) == 0 {
		return []string{}, nil
	}
	for i, n := range list {
		if !utf8.ValidString(n) || strings.IndexByte(n, 0) >= 0 {
			return nil, fmt.Errorf("%s[%d] %q is not UTF-8 text without NUL", field, i, n)
		}
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
	_, err = s.pool.Exec(ctx, insertCredential, args...)
	if isDuplicate(err) {
		return fmt.Errorf("insert credential %s: %w", c.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert credential %s: %w", c.ID, err)
	}
	return nil
}

// InsertCredentialAudited is InsertCredential and AppendAudit in one
// statement: a credential whose event cannot be stored is not stored
// either.
func (s *Store) InsertCredentialAudited(ctx context.Context, c *toolplane.Credential, e *toolplane.AuditEvent) error {
	args, err := credentialArgs(c)
	if err != nil {
		return fmt.Errorf("insert credential %s: %w", c.ID, err)
	}
	if _, err := s.execAudited(ctx, insertCredentialAudited, args, nil, e); err != nil {
		return fmt.Errorf("insert credential %s: %w", c.ID, err)
	}
	return nil
}

const insertCredential = `INSERT INTO credentials (` + credentialColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`

var insertCredentialAudited = audited(insertCredential, 17, false)

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
		micros(c.CreatedAt), optMicros(c.ExpiresAt), optMicros(c.RevokedAt), optMicros(c.LastUsedAt), c.CreatedBy, c.Version, attrs,
		string(c.Listing), c.ListingTop}, nil
}

// GetCredential answers the credential with that ID, in whichever
// organization holds it, or an error wrapping toolplane.ErrNotFound.
func (s *Store) GetCredential(ctx context.Context, id string) (*toolplane.Credential, error) {
	if !dialect.Text(id) {
		// No TEXT value holds it, so no credential has it; asking would
		// answer a database error.
		return nil, fmt.Errorf("get credential %q: %w", id, toolplane.ErrNotFound)
	}
	row := s.pool.QueryRow(ctx, `SELECT `+credentialColumns+` FROM credentials WHERE id = $1`, id)
	c, err := scanCredential(row)
	if errors.Is(err, pgx.ErrNoRows) {
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
	args, err := updateCredentialArgs(c)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	tag, err := s.pool.Exec(ctx, updateCredential, args...)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	ok := tag.RowsAffected() == 1
	if ok {
		c.Version++
	}
	return ok, nil
}

// UpdateCredentialAudited is UpdateCredential and AppendAudit in one
// statement; a stale version stores neither, and an event that cannot be
// stored updates nothing. c.Version moves only when both are stored.
func (s *Store) UpdateCredentialAudited(ctx context.Context, c *toolplane.Credential, e *toolplane.AuditEvent) (bool, error) {
	args, err := updateCredentialArgs(c)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	ok, err := s.execAudited(ctx, updateCredentialAudited, args, nil, e)
	if err != nil {
		return false, fmt.Errorf("update credential %s: %w", c.ID, err)
	}
	if ok {
		c.Version++
	}
	return ok, nil
}

const updateCredential = `UPDATE credentials SET
			roles = $1, tools = $2, label = $3, expires_at = $4,
			revoked_at = COALESCE(revoked_at, $5),
			listing = $6, listing_top = $7,
			version = version + 1
		WHERE organization_id = $8 AND id = $9 AND version = $10`

var updateCredentialAudited = audited(updateCredential, 10, false)

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
// is later, in one statement that neither reads first nor bumps the version
// (GREATEST skips a NULL, so the first touch sets it). PostgreSQL counts
// every row the WHERE clause matched as updated, so none means no such
// credential in org.
func (s *Store) TouchCredential(ctx context.Context, org, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("touch credential %s: zero time", id)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE credentials SET last_used_at = GREATEST(last_used_at, $1)
		WHERE organization_id = $2 AND id = $3`, micros(at), org, id)
	if err != nil {
		return fmt.Errorf("touch credential %s: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("touch credential %s: %w", id, toolplane.ErrNotFound)
	}
	return nil
}

// attributes answers a credential's attributes as their JSONB column
// takes them: JSON text (a string, which the simple protocol sends as
// text, where bytes would go as bytea), "{}" when there are none.
func attributes(a map[string]any) (string, error) {
	if len(a) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(a)
	return string(b), err
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
