package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

// ErrBadRange: a verification's range is not one (from past to).
var ErrBadRange = toolplane.Refine(toolplane.ErrInvalid, "from must not be past to")

// Verifier checks the caller's organization's hash chain and checkpoints
// as stored, for an auditor.
type Verifier struct {
	store toolplane.AuditChainStore
	keys  *auditchain.KeySet
}

// NewVerifier answers a verifier of store's chains against keys, the
// operator's public keys (every key that ever signed).
func NewVerifier(store toolplane.AuditChainStore, keys *auditchain.KeySet) *Verifier {
	return &Verifier{store: store, keys: keys}
}

// Verify verifies the caller's organization's chain from sequence number
// from to to (0: from the first stored, to the end), to an auditor
// (MayRead). A broken chain is an answer (Report.Break), not an error.
func (v *Verifier) Verify(ctx context.Context, from, to int64, by *toolplane.Credential) (auditchain.Report, error) {
	if err := MayRead(by); err != nil {
		return auditchain.Report{}, err
	}
	if from < 0 || to < 0 || (to > 0 && from > to) {
		return auditchain.Report{}, fmt.Errorf("verify %d..%d: %w", from, to, ErrBadRange)
	}
	if v.keys == nil {
		return auditchain.Report{}, errors.New("verify audit chain: no audit keys configured")
	}
	return auditchain.VerifyStore(ctx, v.store, v.keys, by.OrganizationID, from, to)
}
