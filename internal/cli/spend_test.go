package cli

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/spend"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func TestSpendThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}, Store: store, Log: quiet,
		Spend: spend.New(store, nil)}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	admin := mintKey(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil)
	auditor := mintKey(t, store, toolplane.CredentialPerson, "grace", []string{toolplane.RoleAuditor}, nil)
	env := map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": admin}
	const org = "org-1" // mintKey's
	now := time.Now()
	for i, u := range []toolplane.Usage{
		{ID: "u1", OrganizationID: org, RunID: "r1", RootRunID: "r1", AgentID: "support-bot", Tool: "search.web", CostCents: 40, Units: 1, CreatedAt: now.Add(-time.Minute)},
		{ID: "u3", OrganizationID: "org-2", RunID: "r9", RootRunID: "r9", AgentID: "elsewhere-bot", Tool: "search.web", CostCents: 1000, Units: 1, CreatedAt: now.Add(-time.Minute)},
		{ID: "u2", OrganizationID: org, RunID: "r1", RootRunID: "r1", AgentID: "sales-bot", Tool: "search.web", CostCents: 2, Units: 1, CreatedAt: now.Add(-time.Minute)},
	} {
		if err := store.InsertUsage(context.Background(), &u); err != nil {
			t.Fatal(i, err)
		}
	}

	code, out, errOut := runIn(env, "spend", "report", "--by", "agent")
	if code != 0 || !strings.Contains(out, "sales-bot") || !strings.Contains(out, "support-bot") || !strings.Contains(out, "40") || strings.Contains(out, "elsewhere-bot") {
		t.Fatalf("report by agent: %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runIn(env, "spend", "report", "--by", "person"); code == 0 {
		t.Fatalf("report by person: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runIn(env, "spend", "ceiling", "set"); code == 0 {
		t.Fatalf("set without --daily-cents: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runIn(env, "spend", "ceiling", "set", "--daily-cents", "100"); code != 0 || !strings.Contains(out, "100") {
		t.Fatalf("set: %d %s %s", code, out, errOut)
	}
	reader := map[string]string{"TOOLPLANE_SERVER": srv.URL, "TOOLPLANE_KEY": auditor}
	if code, out, errOut := runIn(reader, "spend", "ceiling", "show", "-o", "field=spent_cents"); code != 0 || strings.TrimSpace(out) != "42" {
		t.Fatalf("show as the auditor: %d %q %s", code, out, errOut)
	}
	if code, out, errOut := runIn(reader, "spend", "ceiling", "delete"); code == 0 {
		t.Fatalf("the auditor deleted the ceiling: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := runIn(env, "spend", "ceiling", "delete"); code != 0 {
		t.Fatalf("delete: %d %s %s", code, out, errOut)
	}
}
