package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/internal/backend"
)

// TestAuditVerifyThroughTheCommandLine: the published keys need no
// account; an auditor verifies the chain online; an export verifies
// offline against the published keys, and one changed line is named.
func TestAuditVerifyThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit-keys.json")
	r := startServe(t, "--audit-signing-key", keyFile)
	for i := range 3 {
		req, _ := http.NewRequest("POST", r.base+"/v1/tools/demo.refund_order/invoke",
			strings.NewReader(`{"arguments":{"order_id":"o-50`+string(rune('1'+i))+`","amount_cents":1000,"reason":"cracked screen"},"run_id":"chain-run"}`))
		req.Header.Set("Authorization", "Bearer "+r.agent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The published keys, with no credential.
	resp, err := http.Get(r.base + "/.well-known/toolplane-audit-keys")
	if err != nil {
		t.Fatal(err)
	}
	published, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pub auditchain.KeySet
	if resp.StatusCode != 200 || json.Unmarshal(published, &pub) != nil || len(pub.Keys) != 1 || len(pub.Keys[0].Public) != 32 || bytes.Contains(published, []byte("private")) {
		t.Fatalf("well-known keys: %d %s", resp.StatusCode, published)
	}
	auditor := mintPerson(t, r, "ada", "auditor")
	ctx := context.Background()
	b, err := backend.Open(ctx, r.database)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	chain := b.Store.(toolplane.AuditChainStore)
	var evs []toolplane.AuditEvent
	for deadline := time.Now().Add(30 * time.Second); len(evs) < 3; time.Sleep(20 * time.Millisecond) {
		if evs, err = chain.AuditChain(ctx, DefaultOrganization, 1, 0, 1000); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the calls' events were not chained: %d", len(evs))
		}
	}
	srv := []string{"--server", r.base}
	code, out, errOut := runIn(nil, append([]string{"audit", "verify", "--key", auditor, "-o", "json"}, srv...)...)
	if code != 0 || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("audit verify: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = runIn(nil, append([]string{"audit", "verify", "--key", r.agent}, srv...)...)
	if code != 1 || !strings.Contains(errOut, "denied") {
		t.Fatalf("the agent verified the trail: exit %d %s", code, errOut)
	}

	// Offline: an export, one event a line, and the published keys.
	keys := filepath.Join(dir, "published.json")
	if err := os.WriteFile(keys, published, 0o600); err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, e := range evs {
		l, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	export := filepath.Join(dir, "export.jsonl")
	write := func() {
		t.Helper()
		if err := os.WriteFile(export, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write()
	code, out, errOut = runIn(nil, "audit", "verify", "--file", export, "--keys", keys)
	if code != 0 || !regexp.MustCompile(`(?m)^`+DefaultOrganization+`\s+true\s+1\s+`).MatchString(out) {
		t.Fatalf("offline verify: exit %d\n%s\n%s", code, out, errOut)
	}
	// An export is at least once and several nodes write it: lines out of
	// order, and a batch written twice, still verify.
	ordered := lines
	lines = append([][]byte{ordered[len(ordered)-1]}, ordered...)
	slices.Reverse(lines)
	write()
	code, out, errOut = runIn(nil, "audit", "verify", "--file", export, "--keys", keys)
	if code != 0 || !regexp.MustCompile(`(?m)^`+DefaultOrganization+`\s+true\s+1\s+`).MatchString(out) {
		t.Fatalf("offline verify of repeated, unordered lines: exit %d\n%s\n%s", code, out, errOut)
	}
	lines = ordered
	changed := evs[1]
	changed.Outcome += "-changed"
	if lines[1], err = json.Marshal(changed); err != nil {
		t.Fatal(err)
	}
	write()
	code, _, errOut = runIn(nil, "audit", "verify", "--file", export, "--keys", keys)
	if code != 1 || !strings.Contains(errOut, "changed at 2") {
		t.Fatalf("a changed line: exit %d\n%s", code, errOut)
	}

	// keygen rotates: a second key in the file, the first kept.
	code, out, errOut = runIn(nil, "audit", "keygen", "--file", keyFile)
	if code != 0 || !strings.Contains(out, "(2 keys)") {
		t.Fatalf("keygen: exit %d\n%s\n%s", code, out, errOut)
	}
	ks, err := auditchain.LoadKeys(keyFile)
	if err != nil || len(ks.Keys) != 2 || ks.Keys[0].ID != pub.Keys[0].ID {
		t.Fatalf("keys after keygen: %+v, %v", ks, err)
	}
}
