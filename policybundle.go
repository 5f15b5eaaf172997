package toolplane

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"time"
)

// PolicyBundle is one published version of an organization's rules: the
// files of a rule language (Cedar or Rego) that stage 2 of every decision
// evaluates after the grants. Versions are numbered 1, 2, 3... per
// organization and never change once stored: a rollback publishes an
// older version's files again as a new version, so the latest version is
// always the one in force and its number is the revision every node
// compares its cached rules against.
type PolicyBundle struct {
	OrganizationID string `json:"organization_id"`
	Version        int64  `json:"version"`
	// Language is the rule language of the files ("cedar", "rego"); ""
	// for a version that turns the organization's rules off (Disabled).
	Language string `json:"language,omitempty"`
	// Files maps a file name to its content. A list answers bundles
	// without their files.
	Files map[string]string `json:"files,omitempty"`
	// Digest is PolicyBundleDigest of Files: two versions with the same
	// digest decide alike.
	Digest string `json:"digest"`
	// TimeZone is the IANA zone the rules read time in (the time, hour
	// and weekday a rule sees); "" is the deployment's (serve --time-zone,
	// UTC by default). It is the organization's zone
	// for its rules, versioned with them, so a rule and the clock it was
	// written for are published together.
	TimeZone string `json:"time_zone,omitempty"`
	// Disabled marks the break-glass version: no rules, stage 1 (the
	// grants) alone decides until another version is published.
	Disabled    bool      `json:"disabled,omitempty"`
	PublishedBy string    `json:"published_by"`
	PublishedAt time.Time `json:"published_at"`
	Note        string    `json:"note,omitempty"`
}

// PolicyBundleDigest answers the hex SHA-256 of files, taken over the
// names in byte order with every name and content prefixed by its length,
// so no two different sets of files share a digest by moving bytes from
// one part to the next.
func PolicyBundleDigest(files map[string]string) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	h := sha256.New()
	var n [8]byte
	part := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, name := range names {
		part(name)
		part(files[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// PolicyBundleStore is the storage of policy bundles, scoped to one
// organization.
type PolicyBundleStore interface {
	// InsertPolicyBundle stores b, or answers an error wrapping ErrExists
	// when b's organization already has a bundle at b.Version: of
	// concurrent publishes of one version exactly one is stored.
	InsertPolicyBundle(ctx context.Context, b *PolicyBundle) error
	// InsertPolicyBundleAudited is InsertPolicyBundle, AppendChange of
	// its change record ch and AppendAudit of its event e in one
	// transaction: a version is in force only with its record and its
	// event. A version taken, or a record or event that cannot be stored
	// (a duplicate ID), is an error wrapping ErrExists and stores none.
	InsertPolicyBundleAudited(ctx context.Context, b *PolicyBundle, ch *Change, e *AuditEvent) error
	// GetPolicyBundle answers the organization's bundle at version, files
	// included, or an error wrapping ErrNotFound.
	GetPolicyBundle(ctx context.Context, org string, version int64) (*PolicyBundle, error)
	// PolicyBundleVersion answers the organization's latest version, 0
	// when none was published: the cheap read a node compares its cached
	// rules against.
	PolicyBundleVersion(ctx context.Context, org string) (int64, error)
	// ListPolicyBundles answers the organization's bundles older than
	// version before (every one when before is 0), newest first, at most
	// limit (1..1000, else ErrInvalid), without their files.
	ListPolicyBundles(ctx context.Context, org string, before int64, limit int) ([]PolicyBundle, error)
}
