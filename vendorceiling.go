package toolplane

import (
	"context"
	"time"
)

// VendorCeiling is an organization's recorded concurrency arithmetic for
// one vendor account: the most calls the vendor accepts at once
// (AccountLimit) and the lanes of the agent platform in front of
// toolplane whose runs call that vendor. toolplane runs no workflow and
// holds no limiter across runs; what bounds a vendor across every live
// run is this sum, chosen and written down, and checked (package ceiling)
// whenever either side of it changes:
//
//	sum over lanes (lane's active run limit × most simultaneous calls to
//	the vendor one run of that lane makes) <= AccountLimit
//
// It lives beside the vendor's connections, keyed by the same provider
// name, and holds the account limit itself: several connections of one
// provider may share one vendor account, so the account's limit is a fact
// about the account and is kept once, here.
type VendorCeiling struct {
	OrganizationID string `json:"organization_id"`
	// Provider is the vendor, as connections and tools name it
	// (Connection.Provider).
	Provider string `json:"provider"`
	// AccountLimit is how many calls the vendor account accepts at once.
	AccountLimit int64 `json:"account_limit"`
	// Lanes are the platform's lanes whose runs call the vendor.
	Lanes []Lane `json:"lanes"`
	// Note is the operator's word on where the numbers come from (the
	// vendor's plan, the platform's lane configuration).
	Note      string    `json:"note,omitempty"`
	UpdatedBy string    `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
	// Version increments on every update; updates are conditional on it.
	Version int64 `json:"version"`
}

// Lane is one concurrency lane of the agent platform (a workflow
// engine's function or queue, an agent framework's pool): how many of
// its runs may be active at once, and what one run does, so the most
// calls one run makes to a vendor at once can be read from it. A child
// run started from a run counts in its own lane: its parent, suspended
// while it waits, holds no slot, so Shape never includes a child run.
type Lane struct {
	Name string `json:"name"`
	// ActiveRuns is the lane's active run limit.
	ActiveRuns int64 `json:"active_runs"`
	// Shape is what one run of the lane does.
	Shape RunShape `json:"shape"`
}

// ShapeKind is the kind of one node of a run's shape.
type ShapeKind string

// The kinds of a run shape's nodes.
const (
	// ShapeSequence runs its parts one after another.
	ShapeSequence ShapeKind = "sequence"
	// ShapeBranch runs one of its parts.
	ShapeBranch ShapeKind = "branch"
	// ShapeParallel runs all its parts at once.
	ShapeParallel ShapeKind = "parallel"
	// ShapeCall calls one provider, Fanout calls at once (a wide node).
	ShapeCall ShapeKind = "call"
)

// RunShape is one node of what a run does: a call of a provider, or a
// sequence, branch or parallel of parts. It is a declaration about a
// workflow toolplane does not run, read for arithmetic only.
type RunShape struct {
	Kind ShapeKind `json:"kind"`
	// Provider and Fanout are a call's: the vendor called and how many of
	// its calls the node makes at once (a wide node's concurrency); a
	// Fanout of 0 is 1.
	Provider string `json:"provider,omitempty"`
	Fanout   int64  `json:"fanout,omitempty"`
	// Parts are a sequence's, branch's or parallel's nodes.
	Parts []RunShape `json:"parts,omitempty"`
}

// VendorCeilingStore is the storage of vendor ceilings, one per
// organization and provider. Every method is scoped to one organization.
type VendorCeilingStore interface {
	// InsertVendorCeiling stores c and appends ch, its record in the
	// change log, in one transaction. A ceiling for the organization and
	// provider exists already, or a duplicate change ID: an error wrapping
	// ErrExists, and neither is stored.
	InsertVendorCeiling(ctx context.Context, c *VendorCeiling, ch *Change) error
	// GetVendorCeiling answers the organization's ceiling of provider, or
	// an error wrapping ErrNotFound.
	GetVendorCeiling(ctx context.Context, org, provider string) (*VendorCeiling, error)
	// UpdateVendorCeiling writes AccountLimit, Lanes, Note, UpdatedBy and
	// UpdatedAt where the stored organization, provider and Version are
	// c's, stores Version+1, sets c.Version to it and appends ch in the
	// same transaction. A stale Version, or no row, answers false with a
	// nil error and stores neither.
	UpdateVendorCeiling(ctx context.Context, c *VendorCeiling, ch *Change) (bool, error)
	// DeleteVendorCeiling removes the organization's ceiling of provider
	// where its Version is version, and appends ch in the same
	// transaction; false with a nil error, and nothing recorded, when
	// there is no such row at that version.
	DeleteVendorCeiling(ctx context.Context, org, provider string, version int64, ch *Change) (bool, error)
	// ListVendorCeilings answers the organization's ceilings by provider.
	ListVendorCeilings(ctx context.Context, org string) ([]VendorCeiling, error)
}
