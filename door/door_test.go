package door_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
)

var quiet = slog.New(slog.DiscardHandler)

// openStore answers a migrated store on a fresh SQLite file, closed when
// the test ends, and its database.
func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "door.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store := sqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return store
}

// def answers a tool definition bound to the handler of its name.
func def(name, version string, effect toolplane.Effect, change func(*toolplane.Definition)) toolplane.Definition {
	d := toolplane.Definition{Name: name, Version: version, Kind: toolplane.KindInternal, Description: "A tool.",
		InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Effect: effect, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}}}
	if effect != toolplane.EffectRead {
		no := false
		d.Repeatable = &no
	}
	if change != nil {
		change(&d)
	}
	return d
}

// fixture is a door over a real store, registry and invoker: crm.lookup
// (a read, published at 1.0.0 and 2.0.0), crm.note (a write), crm.refund
// (a write that needs a person's approval), crm.score (metered) and
// crm.export (a read that needs a person's approval).
type fixture struct {
	store  *sqlite.Store
	reg    *registry.Registry
	grants *authz.Service
	door   *door.Door
}

// newFixture answers the fixture; with grants, the door and the invoker
// read an authz service (the invoker computing each call's principal
// through authz.Principals), otherwise each key's own tools are its grant.
func newFixture(t testing.TB, grants bool) *fixture {
	t.Helper()
	store := openStore(t)
	hs := handler.NewRegistry()
	for _, name := range []string{"crm.lookup", "crm.note", "crm.refund", "crm.score", "crm.export"} {
		b, err := handler.BindFunc(name, func(context.Context, handler.Call, any) (any, error) { return map[string]any{"done": name}, nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = hs.Register(b)
	}
	defs := []toolplane.Definition{
		def("crm.note", "1.0.0", toolplane.EffectWrite, nil),
		def("crm.refund", "1.0.0", toolplane.EffectWrite, func(d *toolplane.Definition) { d.Annotations.RequiresApproval = true }),
		def("crm.score", "1.0.0", toolplane.EffectRead, func(d *toolplane.Definition) { d.Metered = true }),
		def("crm.export", "1.0.0", toolplane.EffectRead, func(d *toolplane.Definition) { d.Annotations.RequiresApproval = true }),
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := reg.SetVersions("published", []registry.Version{
		{State: toolplane.StateActive, Def: def("crm.lookup", "1.0.0", toolplane.EffectRead, nil)},
		{State: toolplane.StateActive, Def: def("crm.lookup", "2.0.0", toolplane.EffectRead, nil)},
	}); len(ps) != 0 {
		t.Fatal(ps)
	}
	f := &fixture{store: store, reg: reg}
	cfg := invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet,
		Approvals: approval.New(approval.Config{Store: store, TTL: time.Hour})}
	if grants {
		f.grants = authz.New(authz.Config{Store: store, Registry: reg})
		cfg.Policy = authz.Policy{Service: f.grants}
		cfg.Principals = authz.Principals{Grants: f.grants, Keys: store}
	}
	iv, err := invoke.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.door = &door.Door{Invoker: iv, Registry: reg, Store: store, Keys: apikey.NewCache(0, time.Hour), Authz: f.grants, Log: quiet}
	return f
}

// mint stores a key of kind for subject and answers it.
func (f *fixture) mint(t testing.TB, kind toolplane.CredentialKind, subject string, roles, tools []string, change func(*toolplane.Credential)) string {
	t.Helper()
	id, secret, err := apikey.New(kind)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: kind, Subject: subject, Roles: roles, Tools: tools,
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}
	if change != nil {
		change(c)
	}
	if err := f.store.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return apikey.Key(id, secret)
}

// grant grants agent pattern.
func (f *fixture) grant(t *testing.T, agent, pattern string) *toolplane.Grant {
	t.Helper()
	g := &toolplane.Grant{AgentID: agent, Pattern: pattern}
	operator := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "opal", Roles: []string{toolplane.RoleAgentOperator}}
	if err := f.grants.AddGrant(context.Background(), g, operator); err != nil {
		t.Fatal(err)
	}
	return g
}

// caller answers the caller key authenticates as.
func (f *fixture) caller(t *testing.T, key string) door.Caller {
	t.Helper()
	c, err := f.door.Authenticate(context.Background(), "Bearer "+key, "127.0.0.1", http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBearer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header, token string
		ok            bool
	}{
		{"Bearer tpk_a_b", "tpk_a_b", true},
		{"bearer tpk_a_b", "tpk_a_b", true},
		{"BEARER tpk_a_b", "tpk_a_b", true},
		{"  Bearer   tpk_a_b  ", "tpk_a_b", true},
		{"Bearer\ttpk_a_b", "tpk_a_b", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearertpk_a_b", "", false},
		{"Bearer tpk_a_b extra", "", false},
		{"tpk_a_b", "", false},
	}
	for _, tt := range tests {
		token, ok := door.Bearer(tt.header)
		if token != tt.token || ok != tt.ok {
			t.Errorf("Bearer(%q) = %q, %v; want %q, %v", tt.header, token, ok, tt.token, tt.ok)
		}
	}
}

// Authenticate answers the admitted caller or a refusal of one class, the
// same for every door, and records an admitted key's use.
func TestAuthenticate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	agent := f.mint(t, toolplane.CredentialAgent, "bot", nil, []string{"crm.*"}, nil)
	person := f.mint(t, toolplane.CredentialPerson, "ada", []string{"approver"}, nil, nil)
	revoked := f.mint(t, toolplane.CredentialAgent, "old", nil, nil, func(c *toolplane.Credential) { c.RevokedAt = time.Now() })
	limited := f.mint(t, toolplane.CredentialAgent, "busy", nil, nil, nil)
	lim := ratelimit.New(1, time.Minute)

	tests := []struct {
		name, header string
		limiter      *ratelimit.Limiter
		spend        bool // the key spends its one request first
		subject      string
		kind         door.RefusalKind
		presented    bool
	}{
		{"an agent's key", "Bearer " + agent, nil, false, "bot", 0, false},
		{"the scheme in lower case", "bearer " + agent, nil, false, "bot", 0, false},
		{"a person's key", "Bearer " + person, nil, false, "ada", 0, false},
		{"no header", "", nil, false, "", door.Unauthenticated, false},
		{"another scheme", "Basic " + agent, nil, false, "", door.Unauthenticated, false},
		{"a revoked key", "Bearer " + revoked, nil, false, "", door.Unauthenticated, true},
		{"a wrong secret", "Bearer " + agent[:len(agent)-4] + "AAAA", nil, false, "", door.Unauthenticated, true},
		{"junk", "Bearer nope", nil, false, "", door.Unauthenticated, true},
		{"over the key's budget", "Bearer " + limited, lim, true, "", door.RateLimited, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := *f.door
			d.Limiter = tt.limiter
			// One instant for both requests: the budget's fixed window
			// cannot end between them.
			at := time.Now()
			d.Now = func() time.Time { return at }
			if tt.spend {
				if _, err := d.Authenticate(context.Background(), tt.header, "127.0.0.1", http.Header{}); err != nil {
					t.Fatal(err)
				}
			}
			h := http.Header{}
			c, err := d.Authenticate(context.Background(), tt.header, "127.0.0.1", h)
			if tt.kind == 0 {
				if err != nil || c.Credential == nil || c.Credential.Subject != tt.subject || c.At.IsZero() {
					t.Fatalf("caller %+v, %v; want %s", c, err, tt.subject)
				}
				return
			}
			var refused *door.Refusal
			if !errors.As(err, &refused) || refused.Kind != tt.kind || refused.Presented != tt.presented {
				t.Fatalf("error %#v, want a refusal of kind %d (presented %v)", err, tt.kind, tt.presented)
			}
			if refused.Kind == door.RateLimited && (refused.Failures || h.Get("X-RateLimit-Limit") == "") {
				t.Fatalf("the key's own limit: failures=%v headers=%v", refused.Failures, h)
			}
		})
	}

	// The key's use was recorded.
	id, _, _ := apikey.Parse(agent)
	c, err := f.store.GetCredential(context.Background(), id)
	if err != nil || c.LastUsedAt.IsZero() {
		t.Fatalf("last use not recorded: %+v %v", c, err)
	}
}

// A store that does not answer is a refusal of its own class, never taken
// for a key that is not valid.
func TestAuthenticateWhenTheStoreIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "down.db"))
	if err != nil {
		t.Fatal(err)
	}
	store := sqlite.New(db)
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	db.Close()
	d := &door.Door{Store: store, Log: quiet}
	_, err = d.Authenticate(ctx, "Bearer "+apikey.Key(id, secret), "127.0.0.1", http.Header{})
	var refused *door.Refusal
	if !errors.As(err, &refused) || refused.Kind != door.CredentialsUnavailable || refused.Err == nil {
		t.Fatalf("%#v", err)
	}
}

// What a credential is shown: a person the catalogue, an agent its grants
// (at the pinned version) that its key admits, or without a grant service
// its key's own tools.
func TestShown(t *testing.T) {
	t.Parallel()
	plain := newFixture(t, false)
	granted := newFixture(t, true)
	granted.grant(t, "bot", "crm.lookup@^1.0.0")
	granted.grant(t, "bot", "crm.note")
	granted.grant(t, "bot", "crm.score")

	tests := []struct {
		name  string
		f     *fixture
		kind  toolplane.CredentialKind
		tools []string
		want  []string // name@version
	}{
		{"a person, the catalogue", plain, toolplane.CredentialPerson, nil, []string{"crm.export@1.0.0", "crm.lookup@2.0.0", "crm.note@1.0.0", "crm.refund@1.0.0", "crm.score@1.0.0"}},
		{"no grants: the key's own tools", plain, toolplane.CredentialAgent, []string{"crm.lookup", "crm.note"}, []string{"crm.lookup@2.0.0", "crm.note@1.0.0"}},
		{"no grants, a key of no tools: nothing", plain, toolplane.CredentialAgent, nil, nil},
		{"grants, at the pinned version", granted, toolplane.CredentialAgent, nil, []string{"crm.lookup@1.0.0", "crm.note@1.0.0", "crm.score@1.0.0"}},
		{"grants narrowed by the key", granted, toolplane.CredentialAgent, []string{"crm.note"}, []string{"crm.note@1.0.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject := "bot"
			if tt.kind == toolplane.CredentialPerson {
				subject = "ada"
			}
			cred := &toolplane.Credential{ID: "c", OrganizationID: "org-1", Kind: tt.kind, Subject: subject, Tools: tt.tools}
			ts, err := tt.f.door.Shown(context.Background(), cred, "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tool := range ts {
				got = append(got, tool.Def.Name+"@"+tool.Def.Version)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("shown %v, want %v", got, tt.want)
			}
			// One tool alone is shown the same.
			for _, name := range []string{"crm.lookup", "crm.refund"} {
				one, err := tt.f.door.ShownTool(context.Background(), cred, "", name)
				if err != nil {
					t.Fatal(err)
				}
				want := ""
				for _, w := range tt.want {
					if strings.HasPrefix(w, name+"@") {
						want = w
					}
				}
				got := ""
				if one != nil {
					got = one.Def.Name + "@" + one.Def.Version
				}
				if got != want {
					t.Fatalf("ShownTool(%s) = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// Every outcome of a call, as the door layer answers it to any door.
func TestCall(t *testing.T) {
	t.Parallel()
	plain := newFixture(t, false)
	agent := plain.caller(t, plain.mint(t, toolplane.CredentialAgent, "bot", nil, []string{"crm.*"}, nil))
	narrow := plain.caller(t, plain.mint(t, toolplane.CredentialAgent, "bot", nil, []string{"crm.lookup"}, nil))
	person := plain.caller(t, plain.mint(t, toolplane.CredentialPerson, "ada", []string{"approver"}, nil, nil))

	tests := []struct {
		name   string
		caller door.Caller
		call   door.Call
		kind   door.AnswerKind
		code   toolplane.Code // of an Answered refusal
		field  string
	}{
		{"a read", agent, door.Call{Tool: "crm.lookup"}, door.Answered, "", ""},
		{"a write in a run", agent, door.Call{Tool: "crm.note", RunID: "run-1"}, door.Answered, "", ""},
		{"a write with a key alone", agent, door.Call{Tool: "crm.note", IdempotencyKey: "k-1"}, door.Answered, "", ""},
		{"a write without run or key", agent, door.Call{Tool: "crm.note"}, door.Invalid, "", "run_id"},
		{"a metered call with a key but no run", agent, door.Call{Tool: "crm.score", IdempotencyKey: "k-2"}, door.Invalid, "", "run_id"},
		{"a run id past its bound", agent, door.Call{Tool: "crm.lookup", RunID: strings.Repeat("r", toolplane.MaxRunLen+1)}, door.Invalid, "", "run_id"},
		{"a tool the key does not name", narrow, door.Call{Tool: "crm.note", RunID: "run-narrow"}, door.Answered, toolplane.CodeDenied, ""},
		{"a person's key", person, door.Call{Tool: "crm.lookup"}, door.Denied, "", ""},
		{"a person named without act_for_users", agent, door.Call{Tool: "crm.lookup", OnBehalfOf: "ada"}, door.Denied, "", "on_behalf_of"},
		{"a call that needs a person", agent, door.Call{Tool: "crm.refund", RunID: "run-1"}, door.ApprovalRequired, "", ""},
		// The caller's key scopes the approval as a run would.
		{"a call that needs a person, with a key alone", agent, door.Call{Tool: "crm.refund", IdempotencyKey: "k-3"}, door.ApprovalRequired, "", ""},
		{"a read that needs a person, with a key alone", agent, door.Call{Tool: "crm.export", IdempotencyKey: "k-4"}, door.ApprovalRequired, "", ""},
		// Neither: an approval keyed by no run would cover every later
		// identical call, so the caller is told to name one.
		{"a read that needs a person, without run or key", agent, door.Call{Tool: "crm.export"}, door.Invalid, "", "run_id"},
		{"an unknown tool", agent, door.Call{Tool: "crm.nothing"}, door.Answered, toolplane.CodeToolUnavailable, ""},
		{"arguments that are not JSON", agent, door.Call{Tool: "crm.lookup", Arguments: json.RawMessage(`{`)}, door.Answered, toolplane.CodeInvalidInput, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.call.Source = toolplane.SourceSDK
			a := plain.door.Call(context.Background(), tt.caller, tt.call)
			if a.Kind != tt.kind || a.Field != tt.field {
				t.Fatalf("answer %+v, want kind %d at %q", a, tt.kind, tt.field)
			}
			switch {
			case tt.kind == door.Answered && tt.code == "" && !a.Result.OK:
				t.Fatalf("result %+v", a.Result)
			case tt.kind == door.Answered && tt.code != "" && (a.Result.OK || a.Result.Error.Code != tt.code):
				t.Fatalf("result %+v, want %s", a.Result, tt.code)
			case tt.kind == door.ApprovalRequired && (a.Approval == nil || a.Approval.ID == ""):
				t.Fatalf("approval %+v", a.Approval)
			case tt.kind == door.Invalid && a.Message == "":
				t.Fatal("an invalid request is told why")
			}
		})
	}
}

// A retry answered from the journal is charged to the key's retry
// budget, not its request budget, whichever door asks.
func TestCallChargesARepeatToTheRetryBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.door.Limiter = ratelimit.New(3, time.Minute)
	key := f.mint(t, toolplane.CredentialAgent, "bot", nil, []string{"crm.*"}, nil)
	call := door.Call{Tool: "crm.note", RunID: "run-1", Source: toolplane.SourceSDK}
	for i := range 6 {
		c, err := f.door.Authenticate(context.Background(), "Bearer "+key, "127.0.0.1", http.Header{})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if a := f.door.Call(context.Background(), c, call); a.Kind != door.Answered || !a.Result.OK {
			t.Fatalf("request %d: %+v", i, a)
		}
	}
}

// With grants, a call is decided on the principal the invoker computes
// from the credential the door verified: the grant as it is at the call
// (not as a door saw it), at the version it pins, narrowed by the key.
func TestCallIsDecidedOnTheLiveGrants(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	g := f.grant(t, "bot", "crm.lookup@^1.0.0")
	whole := f.caller(t, f.mint(t, toolplane.CredentialAgent, "bot", nil, nil, nil))
	narrow := f.caller(t, f.mint(t, toolplane.CredentialAgent, "bot", nil, []string{"crm.note"}, nil))
	call := door.Call{Tool: "crm.lookup", RunID: "run-1", Source: toolplane.SourceSDK}

	a := f.door.Call(context.Background(), whole, call)
	if a.Kind != door.Answered || !a.Result.OK {
		t.Fatalf("granted: %+v", a)
	}
	evs, _, err := f.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{Tool: "crm.lookup"}, "", 10)
	if err != nil || len(evs) != 1 || evs[0].ToolVersion != "1.0.0" {
		t.Fatalf("the pinned version ran? %+v %v", evs, err)
	}
	if a := f.door.Call(context.Background(), narrow, call); a.Kind != door.Answered || a.Result.OK || a.Result.Error.Code != toolplane.CodeDenied {
		t.Fatalf("a key that does not admit the tool: %+v", a)
	}
	operator := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "opal", Roles: []string{toolplane.RoleAgentOperator}}
	if err := f.grants.RevokeGrant(context.Background(), g.ID, operator); err != nil {
		t.Fatal(err)
	}
	if a := f.door.Call(context.Background(), whole, call); a.Kind != door.Answered || a.Result.OK || a.Result.Error.Code != toolplane.CodeDenied {
		t.Fatalf("after the grant was revoked: %+v", a)
	}
}

// Spend charges a further call of an admitted request to its key's
// budget, as a request of its own would be, and says so in the headers;
// past the budget it refuses the call as rate limited, with when to
// retry, and spends nothing of another key's. Without a limiter every
// call is admitted.
func TestSpend(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 7, 1, 8, 0, 0, 0, time.UTC)
	cred := &toolplane.Credential{ID: "tpk_a", Kind: toolplane.CredentialAgent}
	other := &toolplane.Credential{ID: "tpk_b", Kind: toolplane.CredentialAgent}
	d := &door.Door{Limiter: ratelimit.New(2, time.Minute), Now: func() time.Time { return now }, Log: quiet}
	admitted := door.Caller{Credential: cred, At: now.Add(-time.Second)}
	tests := []struct {
		name      string
		who       door.Caller
		refused   bool
		remaining string
	}{
		{"the first further call", admitted, false, "1"},
		{"the second", admitted, false, "0"},
		{"one past the budget", admitted, true, "0"},
		{"another key's call", door.Caller{Credential: other, At: now}, false, "1"},
	}
	for _, tt := range tests {
		h := http.Header{}
		at, err := d.Spend(context.Background(), tt.who, h)
		var refusal *door.Refusal
		switch {
		case tt.refused && (!errors.As(err, &refusal) || refusal.Kind != door.RateLimited || refusal.Failures || h.Get("Retry-After") == ""):
			t.Errorf("%s: %v (Retry-After %q); want a rate-limited refusal saying when to retry", tt.name, err, h.Get("Retry-After"))
		case !tt.refused && (err != nil || at.Credential != tt.who.Credential || !at.At.Equal(now)):
			t.Errorf("%s: %+v, %v; want the caller admitted now", tt.name, at, err)
		}
		if got := h.Get("X-RateLimit-Remaining"); got != tt.remaining {
			t.Errorf("%s: X-RateLimit-Remaining %q, want %q", tt.name, got, tt.remaining)
		}
	}
	unlimited := &door.Door{Now: func() time.Time { return now }}
	h := http.Header{}
	if at, err := unlimited.Spend(context.Background(), admitted, h); err != nil || !at.At.Equal(now) || len(h) != 0 {
		t.Errorf("without a limiter: %+v, %v, headers %v; want the call admitted, nothing said", at, err, h)
	}
}
