package console_test

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/console"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// lookupIn are the arguments of try.lookup: an enum, an integer, a
// nested object, a list.
type lookupIn struct {
	Status string   `json:"status"`
	Limit  int      `json:"limit"`
	Tags   []string `json:"tags,omitempty"`
	Where  *struct {
		City string `json:"city"`
	} `json:"where,omitempty"`
}

// tryWorld is a server whose calls are decided on grants (authz.Policy
// over live principals, as a real server's are), with xss.pay (a write
// that needs finance's approval, its account x-sensitive) and try.lookup
// (a read that answers outside content). tryer is a person of org-1;
// other is a person of the same name in org-2.
func newTryWorld(t *testing.T, backend string, limiter ...*ratelimit.Limiter) *world {
	t.Helper()
	w := &world{t: t, links: &links{used: map[string]bool{}}, keys: map[string]string{}}
	switch backend {
	case "postgres":
		pool, err := pgxpool.New(context.Background(), pgtest.SchemaDSN(t, pgtest.DSN(t)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		pg := postgres.New(pool)
		if err := pg.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		w.store = pg
	default:
		w.store, w.db = sqlitetest.OpenDB(t, filepath.Join(t.TempDir(), "toolplane.db"))
	}
	pay, err := handler.Define[payIn, map[string]any](toolplane.Definition{
		Name: "xss.pay", Version: "1.2.0", Description: xssDescription, Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "xss.pay"}}, Effect: toolplane.EffectWrite,
		Approval: &toolplane.ApprovalPolicy{Chain: []string{"finance"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pay.Annotations.RequiresApproval = true
	no := false
	pay.Repeatable = &no
	pay.InputSchema = markSensitive(t, pay.InputSchema, "account")
	lookup, err := handler.Define[lookupIn, map[string]any](toolplane.Definition{
		Name: "try.lookup", Version: "1.0.0", Description: "Looks tickets up.", Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "try.lookup"}}, Effect: toolplane.EffectRead,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Its schema is written out: status an enum, where a nested object
	// and a list sit.
	lookup.InputSchema = []byte(`{"type":"object","required":["status","limit"],"additionalProperties":false,"properties":{
		"status":{"enum":["open","closed"]},"limit":{"type":"integer","minimum":1},
		"tags":{"type":"array","items":{"type":"string"}},
		"where":{"type":"object","properties":{"city":{"type":"string"}}}}}`)
	hs := handler.NewRegistry()
	payB, err := handler.Bind("xss.pay", func(_ context.Context, _ handler.Call, in payIn) (map[string]any, error) {
		w.paid.Store(in.Account, in.Note)
		return map[string]any{"paid": true}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lookupB, err := handler.Bind("try.lookup", func(_ context.Context, _ handler.Call, in lookupIn) (map[string]any, error) {
		city := ""
		if in.Where != nil {
			city = in.Where.City
		}
		return map[string]any{"status": in.Status, "limit": in.Limit, "tags": in.Tags, "city": city}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []*handler.Binding{payB, lookupB} {
		if err := hs.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build([]toolplane.Definition{pay, lookup}, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.grants = authz.New(authz.Config{Store: w.store, Registry: reg})
	approvals := approval.New(approval.Config{Store: w.store, TTL: time.Hour})
	w.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: w.store, Policy: authz.Policy{Service: w.grants}, Approvals: approvals,
		Logger: quiet, Principals: authz.Principals{Grants: w.grants, Keys: w.store}})
	if err != nil {
		t.Fatal(err)
	}
	layer := &door.Door{Invoker: w.iv, Registry: reg, Store: w.store, Log: quiet, Authz: w.grants}
	if len(limiter) > 0 {
		layer.Limiter = limiter[0]
	}
	srv := httptest.NewUnstartedServer(nil)
	w.base = "http://" + srv.Listener.Addr().String()
	people, err := signin.New(signin.Config{Store: w.store, Keys: keyring(t), Gate: layer, PublicURL: w.base, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w.reg = reg
	w.cat = catalog.New(catalog.Config{Store: w.store, Registry: reg, Logger: quiet})
	web, err := console.New(console.Config{People: people, Invoker: w.iv, Registry: reg, PublicURL: w.base, Logger: quiet,
		Catalog: w.cat, Authz: w.grants, Door: layer})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(signin.Path, people.Handler())
	mux.Handle(signin.Path+"/", people.Handler())
	mux.Handle(console.Path, web.Handler())
	mux.Handle(console.Path+"/", web.Handler())
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)

	w.keys["tryer"] = mint(t, w.store, toolplane.CredentialPerson, "tryer", []string{toolplane.RoleApprover, "group:finance"}, nil)
	w.keys["fin"] = mint(t, w.store, toolplane.CredentialPerson, "fin", []string{toolplane.RoleApprover, "group:finance"}, nil)
	w.keys["root"] = mint(t, w.store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil)
	w.keys["other"] = mintIn(t, w.store, "org-2", toolplane.CredentialPerson, "tryer", []string{toolplane.RolePlatformAdmin, "group:finance"})
	return w
}

// mintIn is mint for a key of organization orgID.
func mintIn(t *testing.T, s toolplane.Store, orgID string, kind toolplane.CredentialKind, subject string, roles []string) string {
	t.Helper()
	id, sec, err := apikey.New(kind)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: orgID, Kind: kind, Subject: subject, Roles: roles,
		Hash: apikey.Hash(sec), CreatedAt: time.Now()}
	if err := s.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return apikey.Key(id, sec)
}

// grant grants agent (or, with user set, the person) the pattern in
// org-1, as an agent operator does.
func (w *world) grant(agent, user, pattern string) {
	w.t.Helper()
	op := &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "oliver", Roles: []string{toolplane.RoleAgentOperator}}
	g := &toolplane.Grant{AgentID: agent, UserID: user, Pattern: pattern}
	if user != "" {
		g.AgentID = ""
	}
	if err := w.grants.AddGrant(context.Background(), g, op); err != nil {
		w.t.Fatal(err)
	}
}

var (
	runField      = regexp.MustCompile(`name="run" value="([^"]+)"`)
	contractField = regexp.MustCompile(`name="contract" value="([^"]*)"`)
)

// tryForm opens the Try page of tool and answers it and its fields' form
// keys by label.
func (b *browser) tryForm(tool string) (page, map[string]string) {
	b.w.t.Helper()
	p := b.get(console.Path + "/catalog/" + tool + "/try")
	if p.status != http.StatusOK {
		b.w.t.Fatalf("the Try page of %s: %d %s", tool, p.status, p.body)
	}
	return p, fieldKeys(p.body)
}

var labelFor = regexp.MustCompile(`<label for="(f\d+)">([^ <]+)`)

func fieldKeys(body string) map[string]string {
	out := map[string]string{}
	for _, m := range labelFor.FindAllStringSubmatch(body, -1) {
		out[html.UnescapeString(m[2])] = m[1]
	}
	return out
}

// send sends the Try form of tool, opened as p, with the fields by label.
func (b *browser) send(tool string, p page, keys map[string]string, fields map[string]string) page {
	b.w.t.Helper()
	form := url.Values{"csrf": {p.csrf(b.w.t)}}
	if m := runField.FindStringSubmatch(p.body); m != nil {
		form.Set("run", m[1])
	}
	if m := contractField.FindStringSubmatch(p.body); m != nil {
		form.Set("contract", html.UnescapeString(m[1]))
	}
	for label, v := range fields {
		k, ok := keys[label]
		if !ok {
			b.w.t.Fatalf("the form has no field %q: %v", label, keys)
		}
		form.Set(k, v)
	}
	return b.post(console.Path+"/catalog/"+tool+"/try", b.w.base, form)
}

// TestTryCallIsAuditedAndApproved: a call from a Try page is a call of the
// person's named test agent through the invoker: refused until both the
// test agent and the person are granted the tool, then filed for approval
// (which the person may not answer themselves), audited under the test
// agent acting for the person, run once approved, and replayed from the
// journal when sent again. The sensitive field is never shown again.
func TestTryCallIsAuditedAndApproved(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			w := newTryWorld(t, backend)
			agent := console.TestAgentPrefix + "tryer"
			b := w.browser()
			b.signIn("tryer")
			p, keys := b.tryForm("xss.pay")
			for _, want := range []string{`type="password" id="` + keys["account"] + `"`, "is not granted this tool", `&#34;name&#34;: &#34;xss_pay&#34;`, "&lt;script&gt;"} {
				if !strings.Contains(p.body, want) {
					t.Errorf("the form lacks %q", want)
				}
			}
			if strings.Contains(p.body, "<script>alert") {
				t.Errorf("the description is not escaped")
			}
			fields := map[string]string{"account": account, "note": "try it"}

			// Not granted: refused with its stable code, audited.
			out := b.send("xss.pay", p, keys, fields)
			if out.status != http.StatusOK || !strings.Contains(out.body, `<code class="code">denied</code>`) || !strings.Contains(out.body, "no grant allows xss.pay") {
				t.Fatalf("an ungranted try: %d %s", out.status, out.body)
			}
			// The agent granted, the person not: an agent acting for a
			// person does only what both may.
			w.grant(agent, "", "xss.*")
			out = b.send("xss.pay", p, keys, fields)
			if !strings.Contains(out.body, "this call acts for tryer") {
				t.Fatalf("a try the person is not granted: %s", out.body)
			}
			w.grant("", "tryer", "xss.*")
			p, keys = b.tryForm("xss.pay")
			if strings.Contains(p.body, "is not granted this tool") {
				t.Errorf("the granted test agent is told it is not")
			}
			out = b.send("xss.pay", p, keys, fields)
			m := regexp.MustCompile(`approvals/(apr_[0-9a-f]+)">approval`).FindStringSubmatch(out.body)
			if m == nil {
				t.Fatalf("the try does not wait for approval: %s", out.body)
			}
			id := m[1]
			if strings.Contains(out.body, account) {
				t.Errorf("the page sent back shows the sensitive account")
			}
			a := w.approval(id)
			if a.Tool != "xss.pay" || a.Status != toolplane.ApprovalPending {
				t.Fatalf("the approval: %+v", a)
			}
			// The person the call acts for does not answer it.
			if p := b.decide(id, "approve", "", nil); p.status == http.StatusSeeOther {
				t.Errorf("the person who tried approved their own call")
			}
			fin := w.browser()
			fin.signIn("fin")
			if p := fin.decide(id, "approve", "checked", nil); p.status != http.StatusSeeOther {
				t.Fatalf("fin's approval: %d %s", p.status, p.body)
			}
			// Sent again, the approved call runs, once.
			out = b.send("xss.pay", p, keys, fields)
			if !strings.Contains(out.body, "&#34;paid&#34;:true") || strings.Contains(out.body, account) {
				t.Fatalf("the approved try: %s", out.body)
			}
			if _, ok := w.paid.Load(account); !ok {
				t.Errorf("the handler did not run")
			}
			again := b.send("xss.pay", p, keys, fields)
			if !strings.Contains(again.body, "Replayed") {
				t.Errorf("the same call sent again is not replayed: %s", again.body)
			}

			evs, _, err := w.store.ListAudit(context.Background(), org, toolplane.AuditFilter{AgentID: agent}, "", 50)
			if err != nil {
				t.Fatal(err)
			}
			outcomes := map[string]int{}
			for _, ev := range evs {
				if ev.Kind == "approval" {
					// fin's decision, on the control plane's trail.
					if ev.ApproverID != "fin" || ev.Outcome != "approved" || ev.ApprovalID != id {
						t.Errorf("the decision audited as %+v", ev)
					}
					outcomes["decided"]++
					continue
				}
				if ev.UserID != "tryer" || ev.Source != "console" || ev.Tool != "xss.pay" {
					t.Errorf("audited as %+v", ev)
				}
				if strings.Contains(string(ev.Arguments), account) {
					t.Errorf("the trail holds the sensitive account: %s", ev.Arguments)
				}
				outcomes[ev.Outcome]++
			}
			if outcomes["denied"] != 2 || outcomes["approval_required"] != 1 || outcomes["ok"] < 1 || outcomes["decided"] != 1 {
				t.Errorf("audited outcomes %v; want two denials, one filing, one decision, the call", outcomes)
			}
		})
	}
}

// TestTryFormTypesAndKeeps: the form's strings are typed back by the
// schema ("7" an integer, an enum's choice, one line per item, a nested
// object), the result is shown as a model reads it beside its
// declaration, and a form that cannot be read calls nothing and keeps
// what was typed.
func TestTryFormTypesAndKeeps(t *testing.T) {
	t.Parallel()
	w := newTryWorld(t, "sqlite")
	w.grant(console.TestAgentPrefix+"tryer", "", "try.*")
	w.grant("", "tryer", "try.*")
	b := w.browser()
	b.signIn("tryer")
	p, keys := b.tryForm("try.lookup")
	if !strings.Contains(p.body, `<option value="1">closed</option>`) {
		t.Errorf("the enum is not a select: %s", p.body)
	}
	bad := b.send("try.lookup", p, keys, map[string]string{"limit": "seven", "city": "Oslo <b>", "tags": "a\nb"})
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "limit: a whole number is needed") ||
		!strings.Contains(bad.body, `aria-invalid="true"`) || !strings.Contains(bad.body, `value="Oslo &lt;b&gt;"`) || !strings.Contains(bad.body, ">a\nb</textarea>") {
		t.Fatalf("an unreadable form: %d %s", bad.status, bad.body)
	}
	good := b.send("try.lookup", p, keys, map[string]string{"limit": "7", "status": "1", "city": "Oslo", "tags": "a\nb"})
	want := html.EscapeString(`{"ok":true,"data":{"city":"Oslo","limit":7,"status":"closed","tags":["a","b"]}`)
	if !strings.Contains(good.body, want) {
		t.Fatalf("the result as a model reads it lacks %s: %s", want, good.body)
	}
	if !strings.Contains(good.body, "What a model is shown") || !strings.Contains(good.body, "&#34;name&#34;: &#34;try_lookup&#34;") {
		t.Errorf("the declaration is not beside the result")
	}
	// Arguments the invoker refuses are the model's refusal.
	refused := b.send("try.lookup", p, keys, map[string]string{"limit": "7"})
	if !strings.Contains(refused.body, `<code class="code">invalid_input</code>`) {
		t.Errorf("a call missing status: %s", refused.body)
	}
	wrong := b.send("try.lookup", p, keys, map[string]string{"limit": "0", "status": "0"})
	if !regexp.MustCompile(`class="refusal try-error" id="f\d+-error" role="alert">limit: [^<]+</p>`).MatchString(wrong.body) {
		t.Errorf("the refusal of limit 0 is not shown at its field: %s", wrong.body)
	}
	// A form made from another schema calls nothing.
	stale := strings.Replace(p.body, `name="contract" value="`, `name="contract" value="stale`, 1)
	if got := b.send("try.lookup", page{body: stale}, keys, map[string]string{"limit": "7", "status": "0"}); got.status != http.StatusConflict ||
		!strings.Contains(got.body, "schema changed") || strings.Contains(got.body, `id="outcome"`) {
		t.Errorf("a form of another schema: %d %s", got.status, got.body)
	}
	// A forged form is refused before anything runs.
	if p := b.post(console.Path+"/catalog/try.lookup/try", b.w.base, url.Values{"csrf": {"forged"}}); p.status != http.StatusForbidden {
		t.Errorf("a forged form: %d", p.status)
	}
}

// TestTryStaysInTheOrganization: a person of a second organization, of
// the same name as one granted in the first, tries the same tool: their
// test agent is theirs, refused for want of their organization's grants,
// audited in their organization only, and the first's approval is not
// theirs to open.
func TestTryStaysInTheOrganization(t *testing.T) {
	t.Parallel()
	w := newTryWorld(t, "sqlite")
	w.grant(console.TestAgentPrefix+"tryer", "", "xss.*")
	w.grant("", "tryer", "xss.*")
	first := w.browser()
	first.signIn("tryer")
	p, keys := first.tryForm("xss.pay")
	out := first.send("xss.pay", p, keys, map[string]string{"account": account, "note": "n"})
	m := regexp.MustCompile(`approvals/(apr_[0-9a-f]+)">approval`).FindStringSubmatch(out.body)
	if m == nil {
		t.Fatalf("org-1's try: %s", out.body)
	}

	second := w.browser()
	second.signIn("other")
	p2, keys2 := second.tryForm("xss.pay")
	if !strings.Contains(p2.body, "is not granted this tool") {
		t.Errorf("org-2's test agent is shown org-1's grant")
	}
	out2 := second.send("xss.pay", p2, keys2, map[string]string{"account": account, "note": "n"})
	if !strings.Contains(out2.body, `<code class="code">denied</code>`) {
		t.Fatalf("org-2's try: %s", out2.body)
	}
	if p := second.get(console.Path + "/approvals/" + m[1]); p.status != http.StatusNotFound {
		t.Errorf("org-2 opens org-1's approval: %d", p.status)
	}
	for _, o := range []string{org, "org-2"} {
		evs, _, err := w.store.ListAudit(context.Background(), o, toolplane.AuditFilter{AgentID: console.TestAgentPrefix + "tryer"}, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 {
			t.Errorf("%s's trail holds %d try calls, want its own one", o, len(evs))
		}
		for _, ev := range evs {
			if ev.OrganizationID != o {
				t.Errorf("%s's trail holds %s's event", o, ev.OrganizationID)
			}
		}
	}
	if fmt.Sprint(w.approval(m[1]).OrganizationID) != org {
		t.Errorf("the approval left its organization")
	}
}

// TestTryIsRateLimited: calls from a Try page spend the rate budget the
// door keeps per credential, as an agent's calls do: past it, the page
// answers rate_limited and nothing runs.
func TestTryIsRateLimited(t *testing.T) {
	t.Parallel()
	w := newTryWorld(t, "sqlite", ratelimit.New(2, time.Hour))
	w.grant(console.TestAgentPrefix+"tryer", "", "try.*")
	w.grant("", "tryer", "try.*")
	b := w.browser()
	b.signIn("tryer")
	p, keys := b.tryForm("try.lookup")
	for i := range 3 {
		out := b.send("try.lookup", p, keys, map[string]string{"limit": fmt.Sprint(i + 1), "status": "0"})
		switch {
		case i < 2 && !strings.Contains(out.body, "&#34;ok&#34;:true"):
			t.Fatalf("call %d within the budget: %d %s", i+1, out.status, out.body)
		case i == 2 && (out.status != http.StatusTooManyRequests || !strings.Contains(out.body, `<code class="code">rate_limited</code>`)):
			t.Fatalf("call %d past the budget: %d %s", i+1, out.status, out.body)
		}
	}
	evs, _, err := w.store.ListAudit(context.Background(), org, toolplane.AuditFilter{AgentID: console.TestAgentPrefix + "tryer"}, "", 10)
	if err != nil || len(evs) != 2 {
		t.Errorf("%d calls audited, %v; want the two within the budget", len(evs), err)
	}
}
