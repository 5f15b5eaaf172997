package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

// dropBeforeRead is a store whose first read of org's chained events is
// preceded by a retention pass on the store beneath it: a verification
// that read the head and the checkpoints, and then the events, with a
// drop committed between the two, as an auditor's verification and the
// retention job meet.
type dropBeforeRead struct {
	AuditChainStore
	t    *testing.T
	org  string
	once sync.Once
}

func (d *dropBeforeRead) AuditChain(ctx context.Context, org string, from, to int64, limit int) ([]toolplane.AuditEvent, error) {
	d.once.Do(func() {
		now := at(time.Hour)
		if _, err := auditchain.Retain(ctx, d.AuditChainStore, testKeys(), d.org, at(3500*time.Millisecond), now,
			func(dr auditchain.Drop) *toolplane.AuditEvent { return auditchain.DropEvent(dr, nil, nil, now) }); err != nil {
			d.t.Errorf("Retain = %v", err)
		}
	})
	return d.AuditChainStore.AuditChain(ctx, org, from, to, limit)
}

// testChainVerifyBesideDrop: a verification of an intact chain that a
// retention pass drops a prefix of while it reads answers the chain
// intact (or an error to retry), never a break: nothing was tampered
// with.
func testChainVerifyBesideDrop(t *testing.T, _ AuditChain, s AuditChainStore) {
	org := newOrg()
	appendChain(t, s, org, 6)
	w := &dropBeforeRead{AuditChainStore: s, t: t, org: org}
	r, err := auditchain.VerifyStore(t.Context(), w, testKeys(), org, 0, 0)
	if err != nil {
		return // an error is no false alarm
	}
	if !r.OK {
		t.Fatalf("a verification beside a retention drop reports the intact chain broken: %+v (break %+v)", r, r.Break)
	}
	wantValid(t, s, org, len(readChain(t, s, org)))
}

// testChainTamperBesideDrop: the walk a drop interrupted is walked again,
// and a row changed past the dropped prefix still breaks the chain there:
// verifying again after a drop never hides tampering.
func testChainTamperBesideDrop(t *testing.T, h AuditChain, s AuditChainStore) {
	org := newOrg()
	appendChain(t, s, org, 6)
	exec(t, h, s, h.Unguard...)
	exec(t, h, s, fmt.Sprintf(`UPDATE audit_events SET outcome = 'denied' WHERE organization_id = '%s' AND seq = 5`, org))
	w := &dropBeforeRead{AuditChainStore: s, t: t, org: org}
	r, err := auditchain.VerifyStore(t.Context(), w, testKeys(), org, 0, 0)
	if err != nil {
		t.Fatalf("VerifyStore = %v", err)
	}
	if r.OK || r.Break == nil || r.Break.Kind != auditchain.Changed || r.Break.Seq != 5 {
		t.Fatalf("a row changed past a prefix dropped during the walk: report %+v, break %+v; want event 5 changed", r, r.Break)
	}
}
