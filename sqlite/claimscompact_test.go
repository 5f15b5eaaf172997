package sqlite

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// claimsCompactVersion is the migration that stores a claim's derived key
// and its request hash as bytes.
const claimsCompactVersion = 51

// Claims stored before migration 0051, in the form a binary of that time
// stored them (key and request hash as text), read back after it byte for
// byte through every reader of claims: the journal's read, the lists by
// status (the uncertain actions' among them) paged one by one, the
// notifications' sweep, the lease sweep, a dead node's takeover, the
// counts, and retention. The stored forms are those a new claim's insert
// writes, and every write naming a converted claim by its key's text
// finds it: a second insert of the same key is refused.
func TestMigrationClaimsCompact(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := beforeVersion(t, claimsCompactVersion)
	const org, tool = "org-claims", "payments.refund_order"
	hash := func(seed string) string {
		sum := sha256.Sum256([]byte(seed))
		return hex.EncodeToString(sum[:])
	}
	h1, h2 := hash("one"), hash("two")
	derived := func(run, h string) string {
		return "3:run,7:agent-1," + strconv.Itoa(len(run)) + ":" + run + ",5:agent,64:" + h
	}
	now := time.UnixMicro(time.Now().UnixMicro()).UTC()
	dead := &toolplane.Node{ID: "node-dead/1", Name: "node-dead", StartedAt: now.Add(-time.Hour), HeartbeatAt: now.Add(-time.Hour)}
	if err := s.InsertNode(ctx, dead); err != nil {
		t.Fatal(err)
	}
	claim := func(key, reqHash string, status toolplane.ClaimStatus, created time.Time) *toolplane.Claim {
		return &toolplane.Claim{OrganizationID: org, Tool: tool, Key: key, RequestHash: reqHash, Status: status,
			Result: []byte(`{"ok":true}`), Owner: "node-live/1", LeaseUntil: now.Add(time.Hour), Dispatched: true, Attempts: 1,
			Node: "node-live/1", RunID: "run-1", StepPath: "agent", Arguments: []byte(`{"order":"o-1"}`),
			Invocation: []byte(`{"tool":"` + tool + `"}`), Version: 3, CreatedAt: created, UpdatedAt: created.Add(time.Second)}
	}
	claims := []*toolplane.Claim{
		// A derived key and its own hash: the write call's claim.
		claim(derived("run-1", h1), h1, toolplane.ClaimProcessing, now),
		// Uncertain claims tied in time and tool: ordered by the key's
		// text ("3:run,…" before "6:caller,…"), not by its stored form.
		claim(derived("run-2", h1), h2, toolplane.ClaimUncertain, now.Add(time.Second)),
		claim("6:caller,7:agent-1,3:k-1", h1, toolplane.ClaimUncertain, now.Add(time.Second)),
		claim(derived("run-3", h2), "sha256:"+h2, toolplane.ClaimUncertain, now.Add(time.Second)),
		// Nearly of the form: each stays text, or packs exactly as a new
		// claim's key would.
		claim(strings.ToUpper(derived("run-4", h1)), strings.ToUpper(h1), toolplane.ClaimProcessing, now.Add(2*time.Second)),
		claim(derived("run\x00-5", h1), h1, toolplane.ClaimProcessing, now.Add(2*time.Second)),
		claim(derived("run\xff-6", h1), h1, toolplane.ClaimProcessing, now.Add(2*time.Second)),
		claim("6:caller,7:agent-1,67:k"+h1, h1+"\x00", toolplane.ClaimProcessing, now.Add(2*time.Second)),
		claim(h1, h1, toolplane.ClaimProcessing, now.Add(2*time.Second)),
		claim(derived("run-7", h1)[:len(derived("run-7", h1))-1], h1, toolplane.ClaimProcessing, now.Add(2*time.Second)),
		// For the lease sweep, a dead node's takeover and retention.
		claim(derived("run-8", h2), h2, toolplane.ClaimProcessing, now.Add(3*time.Second)),
		claim(derived("run-9", h1), h1, toolplane.ClaimProcessing, now.Add(3*time.Second)),
		claim(derived("run-10", h2), h2, toolplane.ClaimCompleted, now.Add(-48*time.Hour)),
		claim("6:caller,7:agent-1,3:k-2", h2, toolplane.ClaimCompleted, now.Add(-48*time.Hour)),
	}
	claims[10].LeaseUntil = now.Add(-time.Minute)
	claims[11].Node = dead.ID
	for _, c := range claims[len(claims)-2:] {
		c.Owner, c.LeaseUntil, c.Arguments, c.Invocation, c.Node = "", time.Time{}, nil, nil, ""
	}
	for _, c := range claims {
		// As text, as the columns were.
		if _, err := s.db.ExecContext(ctx, `INSERT INTO claims (`+claimColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.OrganizationID, c.Tool, c.Key, c.RequestHash, string(c.Status), blob(c.Result), c.Owner,
			optMicros(c.LeaseUntil), c.Dispatched, c.Attempts, c.RunID, c.StepPath, blob(c.Arguments), c.Reason,
			c.ReconciledBy, c.Note, c.Version, micros(c.CreatedAt), micros(c.UpdatedAt), blob(c.Invocation), c.Node); err != nil {
			t.Fatalf("store %q before the migration: %v", c.Key, err)
		}
	}

	// What every reader that names no key answers.
	type reads struct {
		processing, uncertain, completed, since, expired, orphaned []toolplane.Claim
		counts                                                     map[string]int
		uncertainCount                                             int
	}
	read := func() reads {
		t.Helper()
		var r reads
		var err error
		for status, into := range map[toolplane.ClaimStatus]*[]toolplane.Claim{
			toolplane.ClaimProcessing: &r.processing, toolplane.ClaimUncertain: &r.uncertain, toolplane.ClaimCompleted: &r.completed} {
			for after := ""; ; {
				page, next, err := s.ListClaims(ctx, org, status, after, 1)
				if err != nil {
					t.Fatal(err)
				}
				*into = append(*into, page...)
				if next == "" {
					break
				}
				after = next
			}
		}
		if r.since, err = s.UncertainClaimsSince(ctx, time.Time{}, 100); err != nil {
			t.Fatal(err)
		}
		if r.expired, err = s.ExpiredClaims(ctx, now, 100); err != nil {
			t.Fatal(err)
		}
		if r.orphaned, err = s.OrphanedClaims(ctx, now.Add(-time.Minute), 100); err != nil {
			t.Fatal(err)
		}
		if r.counts, err = s.CountClaims(ctx, toolplane.ClaimUncertain); err != nil {
			t.Fatal(err)
		}
		if r.uncertainCount, err = s.CountOrgClaims(ctx, org, toolplane.ClaimUncertain, 10); err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := read()
	listed := map[string]toolplane.Claim{}
	for _, list := range [][]toolplane.Claim{before.processing, before.uncertain, before.completed} {
		for _, c := range list {
			listed[c.Key] = c
		}
	}
	for _, c := range claims {
		if got, ok := listed[c.Key]; !ok || got.RequestHash != c.RequestHash {
			t.Fatalf("before the migration, %q listed as %+v", c.Key, got)
		}
	}
	if len(before.uncertain) != 3 || before.uncertain[0].Key != claims[1].Key || before.uncertain[1].Key != claims[3].Key ||
		len(before.expired) != 1 || len(before.orphaned) != 1 || before.uncertainCount != 3 {
		t.Fatalf("before the migration: %+v", before)
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	after := read()
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the claims read back otherwise after the migration:\nbefore %+v\nafter  %+v", before, after)
	}

	for _, c := range claims {
		// The journal's read, by the key's text, finds the claim as the
		// lists read it before.
		got, err := s.GetClaim(ctx, org, tool, c.Key)
		if err != nil {
			t.Fatalf("GetClaim(%q) after the migration: %v", c.Key, err)
		}
		if !reflect.DeepEqual(*got, listed[c.Key]) {
			t.Errorf("GetClaim(%q) after the migration = %+v; want %+v", c.Key, *got, listed[c.Key])
		}
		// The migration stored what a new claim's insert binds, and left
		// every other value as its text.
		var keyType, hashType string
		var key, reqHash []byte
		if err := s.db.QueryRowContext(ctx, `SELECT typeof(key), CAST(key AS BLOB), typeof(request_hash), CAST(request_hash AS BLOB)
			FROM claims WHERE organization_id = ? AND tool = ? AND key = ?`, org, tool, claimKey(c.Key)).Scan(&keyType, &key, &hashType, &reqHash); err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			col, typ string
			stored   []byte
			arg      any
		}{{"key", keyType, key, claimKey(c.Key)}, {"request_hash", hashType, reqHash, sqlstore.ClaimHashArg(c.Key, c.RequestHash)}} {
			var wantType string
			var want []byte
			switch a := v.arg.(type) {
			case []byte:
				wantType, want = "blob", a
			case string:
				wantType, want = "text", []byte(a)
			case int64:
				wantType, want = "integer", []byte(strconv.Itoa(int(a)))
			}
			if v.typ != wantType || string(v.stored) != string(want) {
				t.Errorf("%q: %s stored as %s %x; want %s %x", c.Key, v.col, v.typ, v.stored, wantType, want)
			}
		}
		// One claim for one text: the same key is refused again.
		again := *c
		again.RequestHash = "other"
		if ok, err := s.InsertClaim(ctx, &again); ok || err != nil {
			t.Errorf("InsertClaim(%q) after the migration = %v, %v; want false, nil", c.Key, ok, err)
		}
	}
	// Derived keys and their hashes packed: the first claim's stored key
	// is its text but the digits, then their 32 bytes.
	if k, ok := claimKey(claims[0].Key).([]byte); !ok || len(k) != len(claims[0].Key)-32 {
		t.Errorf("a derived key binds as %v", claimKey(claims[0].Key))
	}

	// Writes naming a converted claim by its text find it.
	c := listed[claims[0].Key]
	c.Dispatched, c.Attempts, c.UpdatedAt = true, 2, now.Add(time.Minute)
	if ok, err := s.DispatchClaim(ctx, &c); !ok || err != nil {
		t.Fatalf("DispatchClaim = %v, %v", ok, err)
	}
	c.Status, c.Result, c.Owner, c.Arguments, c.Invocation, c.UpdatedAt = toolplane.ClaimCompleted, []byte(`{"done":1}`), "", nil, nil, now.Add(2*time.Minute)
	e := &toolplane.AuditEvent{OrganizationID: org, ID: "aud_1", Tool: tool, Outcome: "ok", Key: c.Key, ArgumentsHash: h1, CreatedAt: now}
	if ok, err := s.CompleteClaimAudited(ctx, &c, e); !ok || err != nil {
		t.Fatalf("CompleteClaimAudited = %v, %v", ok, err)
	}
	if got, err := s.GetClaim(ctx, org, tool, c.Key); err != nil || !reflect.DeepEqual(*got, c) {
		t.Errorf("after its completion, GetClaim = %+v, %v; want %+v", got, err, c)
	}
	u := listed[claims[2].Key]
	if ok, err := s.DeleteClaim(ctx, org, tool, u.Key, u.Version); !ok || err != nil {
		t.Fatalf("DeleteClaim = %v, %v", ok, err)
	}
	// Retention removes the two completed before, and not the one just
	// completed.
	if n, err := s.DeleteCompletedClaims(ctx, now.Add(-time.Hour), 10); n != 2 || err != nil {
		t.Errorf("DeleteCompletedClaims = %d, %v; want 2", n, err)
	}
}
