package toolplane

import "context"

// ClaimDispatcher is a ClaimStore that writes the dispatch mark, the write
// every write call makes just before its handler starts, as a change of
// the three fields it changes rather than of the whole row: the journal
// uses it when the store has it, UpdateClaim otherwise, to the same
// effect.
type ClaimDispatcher interface {
	// DispatchClaim writes c.Dispatched, c.Attempts and c.UpdatedAt where
	// the stored Version equals c.Version, leaving the rest of the row as
	// stored, sets c.Version to the new version, and reports whether it
	// wrote. The caller holds c at that version, so the rest of the row is
	// what c says.
	DispatchClaim(ctx context.Context, c *Claim) (bool, error)
}

// ClaimCompleter is a ClaimStore that writes a claim's completion, the
// last write of every write call, as a change of the fields a completion
// changes rather than of the whole row, with the call's audit event in the
// same transaction: the journal uses it when the store has it,
// UpdateClaimAudited otherwise, to the same effect.
type ClaimCompleter interface {
	// CompleteClaimAudited writes c.Status, c.Result, c.Owner,
	// c.Arguments, c.Invocation and c.UpdatedAt where the stored Version
	// equals c.Version, leaving the rest of the row as stored, and appends
	// e in the same transaction; a stale version stores neither, and so
	// does an event that cannot be stored. It sets c.Version to the new
	// version and reports whether it wrote. The caller holds c at that
	// version, so the rest of the row is what c says.
	CompleteClaimAudited(ctx context.Context, c *Claim, e *AuditEvent) (bool, error)
}
