package cli

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ceiling"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func TestVendorCeilingThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}, Store: store, Log: quiet,
		VendorCeilings: ceiling.New(store, nil)}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	admin := mintKey(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil)
	auditor := mintKey(t, store, toolplane.CredentialPerson, "grace", []string{toolplane.RoleAuditor}, nil)
	env := map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": admin}
	lanes := []string{"--lane", "interactive=20:par(call(exa,3),call(exa,3))", "--lane", "batch=5:seq(call(exa,10),call(fullenrich,40))"}

	// Refused with the arithmetic named; nothing stored.
	code, out, errOut := runIn(env, append([]string{"vendors", "ceiling", "set", "exa", "--account-limit", "100"}, lanes...)...)
	if code == 0 || !strings.Contains(errOut, "interactive: 20 runs × 6 calls = 120; batch: 5 runs × 10 calls = 50; sum 170 > account limit 100") {
		t.Fatalf("set over the limit: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runIn(env, "vendors", "ceiling", "show", "exa"); code == 0 {
		t.Fatalf("show after a refused set: %d %s %s", code, out, errOut)
	}

	code, out, errOut = runIn(env, append([]string{"vendors", "ceiling", "set", "exa", "--account-limit", "200", "--note", "growth plan"}, lanes...)...)
	if code != 0 {
		t.Fatalf("set: %d %s %s", code, out, errOut)
	}
	for _, want := range []string{"account limit:  200", "interactive  20    6      120      par(call(exa,3),call(exa,3))",
		"batch        5     10     50       seq(call(exa,10),call(fullenrich,40))", "sum 170 <= account limit 200"} {
		if !strings.Contains(out, want) {
			t.Errorf("set printed\n%s\nwant it to hold %q", out, want)
		}
	}

	// The file form, from the version shown, with a lane that calls the
	// vendor under another name: stored, with a warning.
	file := filepath.Join(t.TempDir(), "exa.yaml")
	os.WriteFile(file, []byte(`account_limit: 150
version: 1
lanes:
  - name: batch
    active_runs: 5
    shape: {kind: call, provider: exa-ai, fanout: 10}
`), 0o600)
	code, out, errOut = runIn(env, "vendors", "ceiling", "set", "exa", "--file", file, "-o", "json")
	if code != 0 || !strings.Contains(errOut, "lane batch makes no call to exa") {
		t.Fatalf("set --file: %d %s %s", code, out, errOut)
	}
	var answer struct {
		VendorCeiling ceiling.View `json:"vendor_ceiling"`
	}
	if err := json.Unmarshal([]byte(out), &answer); err != nil || answer.VendorCeiling.Version != 2 || answer.VendorCeiling.AccountLimit != 150 {
		t.Fatalf("set --file answered %s (%v)", out, err)
	}
	if code, _, errOut := runIn(env, "vendors", "ceiling", "set", "exa", "--account-limit", "9", "--version", "1"); code == 0 || !strings.Contains(errOut, "version 2") {
		t.Fatalf("set from a stale version: %d %s", code, errOut)
	}

	code, out, errOut = runIn(map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": auditor}, "vendors", "ceiling", "list")
	if code != 0 || !strings.Contains(out, "ARITHMETIC.SUM") || !strings.Contains(out, "exa       150") {
		t.Fatalf("an auditor's list: %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runIn(map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": auditor}, "vendors", "ceiling", "delete", "exa"); code == 0 || !strings.Contains(errOut, "platform_admin") {
		t.Fatalf("an auditor's delete: %d %s", code, errOut)
	}

	for _, bad := range [][]string{
		{"vendors", "ceiling", "set", "exa"},
		{"vendors", "ceiling", "set", "exa", "--account-limit", "5", "--lane", "batch=5"},
		{"vendors", "ceiling", "set", "exa", "--account-limit", "5", "--lane", "batch=5:par(call(exa)"},
		{"vendors", "ceiling", "set", "exa", "--account-limit", "5", "--file", file},
	} {
		if code, _, errOut := runIn(env, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, code, errOut)
		}
	}
	if code, out, errOut := runIn(env, "vendors", "ceiling", "delete", "exa", "--version", "2"); code != 0 {
		t.Fatalf("delete: %d %s %s", code, out, errOut)
	}
	if code, out, _ := runIn(env, "vendors", "ceiling", "list", "-o", "json"); code != 0 || !strings.Contains(out, `"items": []`) {
		t.Fatalf("list after delete: %d %s", code, out)
	}
}
