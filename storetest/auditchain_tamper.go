package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

func init() {
	auditChainCases = append(auditChainCases,
		auditChainCase{"TamperTailUnderCheckpoint", testTamperTailUnderCheckpoint},
		auditChainCase{"TamperTailThroughRetentionDoor", testTamperTailThroughRetentionDoor},
		auditChainCase{"VerifyFromPastHead", testVerifyFromPastHead},
		auditChainCase{"TamperListReencoded", testTamperListReencoded},
		auditChainCase{"CheckpointRefusesABrokenChain", testCheckpointRefusesABrokenChain},
	)
}

// A checkpoint signed at the head (6); rows 5 and 6 are then deleted with
// the protections dropped, and the head moved back as an attacker would:
// the checkpoint still vouches for rows that are gone.
func testTamperTailUnderCheckpoint(t *testing.T, h AuditChain, s AuditChainStore) {
	org := newOrg()
	evs := appendChain(t, s, org, 6)
	signCheckpoint(t, s, evs[5])
	wantValid(t, s, org, 6)
	for _, st := range h.Unguard {
		if err := h.Exec(t, s, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	exec(t, h, s, fmt.Sprintf(`DELETE FROM audit_events WHERE organization_id = '%s' AND seq >= 5`, org))
	if h.HeadTable {
		exec(t, h, s, `UPDATE audit_heads SET seq = 4, hash = `+h.Bytes(evs[3].Hash)+` WHERE organization_id = '`+org+`'`)
	}
	wantBreakAt(t, verifyStored(t, s, org), 5, auditchain.Deleted)
}

// The same through retention's door with the triggers in place: the
// door opens only at a checkpoint that is the chain's, and lets through
// only a whole prefix of the chain up to it, so neither the tail nor a
// row in the middle can be deleted through it, and (PostgreSQL) the head
// never moves back.
func testTamperTailThroughRetentionDoor(t *testing.T, h AuditChain, s AuditChainStore) {
	org := newOrg()
	evs := appendChain(t, s, org, 6)
	signCheckpoint(t, s, evs[5])
	signCheckpoint(t, s, evs[3])
	wantValid(t, s, org, 6)
	var tries []string
	if h.HeadTable {
		door := func(through int) string {
			return `BEGIN; SELECT set_config('toolplane.audit_retention', '` + org + `', true); SELECT set_config('toolplane.audit_retention_through', '` + fmt.Sprint(through) + `', true); `
		}
		tries = []string{
			door(6) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq >= 5; COMMIT`,
			door(6) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq = 3; COMMIT`,
			door(4) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq = 5; COMMIT`,
			door(4) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq BETWEEN 2 AND 4; COMMIT`,
			door(3) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq <= 3; COMMIT`,
			`UPDATE audit_heads SET seq = 4, prev_hash = ` + h.Bytes(evs[2].Hash) + `, hash = ` + h.Bytes(evs[3].Hash) + ` WHERE organization_id = '` + org + `'`,
			`DELETE FROM audit_heads WHERE organization_id = '` + org + `'`,
		}
	} else {
		door := func(through int) string {
			return `BEGIN; INSERT INTO audit_retention (organization_id, through) VALUES ('` + org + `', ` + fmt.Sprint(through) + `); `
		}
		tries = []string{
			door(6) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq >= 5; DELETE FROM audit_retention; COMMIT`,
			door(6) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq = 3; DELETE FROM audit_retention; COMMIT`,
			// The door left open: the commit is refused.
			door(6) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq = 3; COMMIT`,
			door(4) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq = 5; DELETE FROM audit_retention; COMMIT`,
			door(3) + `DELETE FROM audit_events WHERE organization_id = '` + org + `' AND seq <= 3; DELETE FROM audit_retention; COMMIT`,
			`DELETE FROM audit_organizations WHERE organization_id = '` + org + `'`,
			`UPDATE audit_organizations SET organization_id = 'x' WHERE organization_id = '` + org + `'`,
		}
	}
	for _, st := range tries {
		if err := h.Exec(t, s, st); err == nil {
			t.Errorf("%s was not refused", st)
		}
	}
	wantChain(t, readChain(t, s, org), "ev-001", "ev-002", "ev-003", "ev-004", "ev-005", "ev-006")
	wantValid(t, s, org, 6)
}

// Verifying what is new since the last checkpoint, when nothing is, holds.
func testVerifyFromPastHead(t *testing.T, h AuditChain, s AuditChainStore) {
	org := newOrg()
	evs := appendChain(t, s, org, 6)
	signCheckpoint(t, s, evs[5])
	r, err := auditchain.VerifyStore(t.Context(), s, testKeys(), org, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK {
		t.Fatalf("VerifyStore(from 7) of an intact chain whose head is 6 = %+v, break %+v", r, r.Break)
	}
}

// Row 4's classifications rewritten into another JSON form of the same
// list ("pii" with an escape): the classification filter, a match on the
// stored text, no longer finds it, so verification must not vouch for it.
func testTamperListReencoded(t *testing.T, h AuditChain, s AuditChainStore) {
	org := tamperChain(t, h, s)
	f := toolplane.AuditFilter{Classification: "pii"}
	before, _, err := s.ListAudit(t.Context(), org, f, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, h, s, `UPDATE audit_events SET classifications = '["p\u0069i","financial"]' WHERE organization_id = '`+org+`' AND seq = 4`)
	after, _, err := s.ListAudit(t.Context(), org, f, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) >= len(before) {
		t.Fatalf("the rewritten row still matches the filter (%d, %d events): the case tests nothing", len(before), len(after))
	}
	wantBreakAt(t, verifyStored(t, s, org), 4, auditchain.Changed)
}

// A chain changed since its last checkpoint is not signed: the job's
// signature would vouch for the change.
func testCheckpointRefusesABrokenChain(t *testing.T, h AuditChain, s AuditChainStore) {
	org := tamperChain(t, h, s)
	exec(t, h, s, `UPDATE audit_events SET outcome = 'ok-changed' WHERE organization_id = '`+org+`' AND seq = 4`)
	if _, err := auditchain.Checkpoint(t.Context(), s, testKeys(), at(2*time.Hour)); err == nil {
		t.Fatal("Checkpoint signed a changed chain without an error")
	}
	cps, err := s.AuditCheckpoints(t.Context(), org, 3, 0)
	if err != nil || len(cps) != 0 {
		t.Fatalf("checkpoints past the change = %+v, %v; want none", cps, err)
	}
}

// wantBreakAt fails unless r names a break of kind at seq.
func wantBreakAt(t *testing.T, r auditchain.Report, seq int64, kind auditchain.Kind) {
	t.Helper()
	if r.OK || r.Break == nil || r.Break.Kind != kind || r.Break.Seq != seq {
		t.Fatalf("verify = %+v, break %+v; want %s at %d", r, r.Break, kind, seq)
	}
}
