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
