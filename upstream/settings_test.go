package upstream_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/upstream"
)

func yes() *bool { b := true; return &b }

func TestRuntimeSettingsTightenAndRelaxOnEveryNode(t *testing.T) {
	var sent atomic.Int32
	_, upURL := goUpstream(t, &sent)
	cfg := upstream.Config{Slug: "up", URL: upURL,
		Tools: map[string]upstream.Relax{"lookup": {Effect: toolplane.EffectRead, RequiresApproval: no()}}}
	e := newEnv(t, nil, cfg)
	quiet := slog.New(slog.DiscardHandler)
	settings := upstream.NewSettings(e.store, e.set, "org-1", quiet)
	// A second node: its own connection and registry, the same store.
	other := newEnv(t, nil, cfg)
	otherSettings := upstream.NewSettings(e.store, other.set, "org-1", quiet)

	operator := &toolplane.Credential{ID: "cred-op", OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "ops", Roles: []string{toolplane.RolePlatformAdmin}}
	needsApproval := func(t *testing.T, e *env, tool, args, run string) bool {
		t.Helper()
		in := e.inv(run)
		in.Principal.Tools = []string{tool}
		r, err := e.iv.InvokeJSON(e.ctx, tool, []byte(args), in)
		var ar *invoke.ApprovalRequired
		if errors.As(err, &ar) {
			return true
		}
		if err != nil || !r.OK {
			t.Fatalf("%s: %+v %v", tool, r, err)
		}
		return false
	}

	// Who may: the operator only.
	for _, by := range []*toolplane.Credential{
		{ID: "c1", OrganizationID: "org-2", Kind: toolplane.CredentialPerson, Subject: "other-admin", Roles: []string{toolplane.RolePlatformAdmin}},
		{ID: "c2", OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "owner", Roles: []string{toolplane.RoleToolOwner + ":platform-team", toolplane.RoleApprover}},
		{ID: "c3", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1"},
	} {
		if _, err := settings.Put(e.ctx, by, "up", "send", upstream.Relax{Effect: toolplane.EffectRead}); !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("%s of %s changed a setting: %v", by.Subject, by.OrganizationID, err)
		}
	}
	if _, err := settings.Put(e.ctx, operator, "up", "nope", upstream.Relax{}); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("a tool the server does not list: %v", err)
	}
	if _, err := settings.Put(e.ctx, operator, "up", "send", upstream.Relax{Effect: toolplane.EffectRead, Destructive: yes()}); !errors.Is(err, upstream.ErrConfig) {
		t.Errorf("a destructive read: %v", err)
	}

	// An MCP session open meanwhile is shown the new hints.
	changed := make(chan struct{}, 1)
	cs := e.clientFor(t, e.mcp.Handler(), changed)
	shownApproval := func() any {
		t.Helper()
		for tool, err := range cs.Tools(e.ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == "mcp_up_send" {
				return tool.Meta["toolplane/requires_approval"]
			}
		}
		t.Fatal("mcp_up_send not listed")
		return nil
	}
	if got := shownApproval(); got != true {
		t.Fatalf("send listed with requires_approval %v", got)
	}

	// Relax send at runtime: no approval, on this node at once and on the
	// other after it refreshes.
	if !needsApproval(t, e, "mcp.up.send", `{"to":"a"}`, "run-1") || !needsApproval(t, other, "mcp.up.send", `{"to":"a"}`, "run-1") {
		t.Fatal("send did not start guarded")
	}
	got, err := settings.Put(e.ctx, operator, "up", "send", upstream.Relax{Effect: toolplane.EffectWrite, Destructive: no(), RequiresApproval: no()})
	if err != nil {
		t.Fatal(err)
	}
	if got.Effective.RequiresApproval || got.Effective.Destructive || got.Stored == nil || got.UpdatedBy != "ops" {
		t.Errorf("setting after put: %+v", got)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the session was not told its tools changed")
	}
	if got := shownApproval(); got != false {
		t.Errorf("after the relaxation the session lists requires_approval %v", got)
	}
	if needsApproval(t, e, "mcp.up.send", `{"to":"b"}`, "run-2") || sent.Load() != 1 {
		t.Errorf("relaxed send still waits for approval (sent %d)", sent.Load())
	}
	if !needsApproval(t, other, "mcp.up.send", `{"to":"b"}`, "run-2") {
		t.Errorf("the other node relaxed before reading the store")
	}
	if err := otherSettings.Refresh(e.ctx); err != nil {
		t.Fatal(err)
	}
	if needsApproval(t, other, "mcp.up.send", `{"to":"c"}`, "run-3") {
		t.Errorf("the other node did not apply the relaxation")
	}

	// Tighten lookup, relaxed by the file: the next call waits, on both.
	if _, err := settings.Put(e.ctx, operator, "up", "lookup", upstream.Relax{RequiresApproval: yes()}); err != nil {
		t.Fatal(err)
	}
	if err := otherSettings.Refresh(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*env{e, other} {
		if !needsApproval(t, n, "mcp.up.lookup", `{"id":"x"}`, "run-4") {
			t.Errorf("tightened lookup answered without approval")
		}
		if tool, _ := n.reg.Get("", "mcp.up.lookup"); tool.Def.Effect != toolplane.EffectWrite || tool.Def.Version != "1.0.0" {
			t.Errorf("tightened lookup: effect %s version %s (the contract did not change)", tool.Def.Effect, tool.Def.Version)
		}
	}

	// Reset: the file's relaxation again.
	if _, err := settings.Reset(e.ctx, operator, "up", "lookup"); err != nil {
		t.Fatal(err)
	}
	if needsApproval(t, e, "mcp.up.lookup", `{"id":"y"}`, "run-5") {
		t.Errorf("reset lookup still waits for approval")
	}
	if _, err := settings.Reset(e.ctx, operator, "up", "lookup"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("reset twice: %v", err)
	}

	// Every change is in the operator's change log.
	for kind, want := range map[string]int{"upstream.tool_settings.put": 2, "upstream.tool_settings.reset": 1} {
		changes, _, err := e.store.ListChanges(e.ctx, "org-1", kind, "", "", 10)
		if err != nil || len(changes) != want {
			t.Errorf("%s: %d changes logged, want %d (%v)", kind, len(changes), want, err)
		}
	}
}

// A setting and its change record are stored together or not at all: when
// the change log refuses the record, the change answers an error and no
// node applies it, neither a put nor a reset.
func TestASettingChangeWithoutItsRecordIsNotStored(t *testing.T) {
	t.Parallel()
	var sent atomic.Int32
	_, upURL := goUpstream(t, &sent)
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: upURL})
	settings := upstream.NewSettings(e.store, e.set, "org-1", slog.New(slog.DiscardHandler))
	operator := &toolplane.Credential{ID: "cred-op", OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "ops", Roles: []string{toolplane.RolePlatformAdmin}}
	kept := upstream.Relax{Effect: toolplane.EffectWrite, Destructive: no(), RequiresApproval: yes()}
	if _, err := settings.Put(e.ctx, operator, "up", "send", kept); err != nil {
		t.Fatal(err)
	}
	before, err := e.store.ListUpstreamToolSettings(e.ctx)
	if err != nil || len(before) != 1 {
		t.Fatalf("settings after the first put: %+v, %v", before, err)
	}
	// The change log fails every insert from now on, as a full disk or a
	// lost connection between the two writes would.
	if _, err := e.db.ExecContext(e.ctx, `CREATE TRIGGER changes_refused BEFORE INSERT ON changes
		BEGIN SELECT RAISE(ABORT, 'change log refused'); END`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func() (*upstream.Setting, error)
	}{
		{"put", func() (*upstream.Setting, error) {
			return settings.Put(e.ctx, operator, "up", "send", upstream.Relax{Effect: toolplane.EffectRead})
		}},
		{"put of another tool", func() (*upstream.Setting, error) {
			return settings.Put(e.ctx, operator, "up", "lookup", upstream.Relax{Effect: toolplane.EffectRead})
		}},
		{"reset", func() (*upstream.Setting, error) { return settings.Reset(e.ctx, operator, "up", "send") }},
	}
	for _, tt := range tests {
		if _, err := tt.change(); err == nil {
			t.Fatalf("%s answered no error with the change log refusing its record", tt.name)
		}
		after, err := e.store.ListUpstreamToolSettings(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != 1 || after[0].Tool != "send" || string(after[0].Settings) != string(before[0].Settings) {
			t.Fatalf("%s without its record changed the stored settings: %+v", tt.name, after)
		}
	}
	if got, err := settings.Get(e.ctx, operator, "up", "send"); err != nil || !got.Effective.RequiresApproval || got.Effective.Effect != toolplane.EffectWrite {
		t.Errorf("send on this node: %+v, %v; want the first setting still applied", got, err)
	}
}

// TestSettingsFollowTheStoresFeed: a node following the store's change
// feed applies a setting another node stores at once, with its poll an
// hour long: an idle node need not read the settings every few seconds.
func TestSettingsFollowTheStoresFeed(t *testing.T) {
	var sent atomic.Int32
	_, upURL := goUpstream(t, &sent)
	cfg := upstream.Config{Slug: "up", URL: upURL,
		Tools: map[string]upstream.Relax{"lookup": {Effect: toolplane.EffectRead, RequiresApproval: no()}}}
	e := newEnv(t, nil, cfg)
	quiet := slog.New(slog.DiscardHandler)
	settings := upstream.NewSettings(e.store, e.set, "org-1", quiet)
	other := newEnv(t, nil, cfg)
	otherSettings := upstream.NewSettings(e.store, other.set, "org-1", quiet)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); otherSettings.Follow(ctx, e.store, time.Hour) }()
	defer func() { cancel(); <-done }()

	operator := &toolplane.Credential{ID: "cred-op", OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "ops", Roles: []string{toolplane.RolePlatformAdmin}}
	if _, err := settings.Put(e.ctx, operator, "up", "lookup", upstream.Relax{RequiresApproval: yes()}); err != nil {
		t.Fatal(err)
	}
	in := other.inv("run-1")
	in.Principal.Tools = []string{"mcp.up.lookup"}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := other.iv.InvokeJSON(other.ctx, "mcp.up.lookup", []byte(`{"id":"x"}`), in)
		var ar *invoke.ApprovalRequired
		if errors.As(err, &ar) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other node did not apply the tightening within 5s of its feed telling it (last: %v)", err)
		}
	}
}
