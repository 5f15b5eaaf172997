package connection_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// world is what a broker case set up: connections by name, with the
// token each holds.
type world struct {
	e    *env
	s    *service
	ids  map[string]string
	toks map[string]string
}

// add creates the shared bearer connection name of provider for by's
// organization.
func (w *world) add(by *toolplane.Credential, name, provider string, edit func(*connection.Input)) {
	tok := secretToken(name)
	in := static(name, provider, tok)
	if edit != nil {
		edit(&in)
	}
	c := w.e.create(w.s, by, in)
	w.ids[name], w.toks[name] = c.ID, tok
}

// own stores user's own connection name of provider.
func (w *world) own(user, name, provider string) {
	tok := secretToken(name)
	c := w.e.personal(org, user, provider, name, tok)
	w.ids[name], w.toks[name] = c.ID, tok
}

// setState writes the connection name's state as another part of the
// platform would.
func (w *world) setState(name string, state toolplane.ConnectionState) {
	t := w.e.t
	if state == toolplane.ConnectionRevoked {
		if _, err := w.s.Revoke(t.Context(), admin, w.ids[name], "test"); err != nil {
			t.Fatal(err)
		}
		return
	}
	c, _ := w.e.stored(org, w.ids[name])
	c.State = state
	if ok, err := w.e.store.UpdateConnection(t.Context(), c, nil); !ok || err != nil {
		t.Fatalf("update %s: %t, %v", name, ok, err)
	}
}

func TestRelease(t *testing.T) {
	t.Parallel()
	crmRead := tool("crm.read", "crm")
	scoped := func(sc toolplane.ConnectionScope) func(*connection.Input) {
		return func(in *connection.Input) { in.Scope = sc }
	}
	limit := scoped(toolplane.ConnectionScope{MaxAmountCentsPerCall: 1000})
	pay := func(v any) func(*world) any { return func(*world) any { return map[string]any{"amount_cents": v} } }
	pick := func(name string) func(*world) any {
		return func(w *world) any { return map[string]any{connection.ChoiceArgument: w.ids[name]} }
	}
	httpTool := func(host string) *toolplane.Definition {
		d := tool("crm.send", "crm")
		d.Binding.HTTP = &toolplane.HTTPBinding{Method: "POST", URL: "https://" + host + "/v1/messages"}
		return d
	}
	// pathTool's URL is a path, sent under its connection's base URL.
	pathTool := tool("crm.send", "crm")
	pathTool.Binding.HTTP = &toolplane.HTTPBinding{Method: "POST", URL: "/messages"}
	for _, tc := range []struct {
		name  string
		setup func(*world)
		user  string
		tool  *toolplane.Definition
		args  func(*world) any
		want  string         // the connection released, by name
		code  toolplane.Code // or the refusal
		names []string       // connections the refusal names
	}{
		{name: "shared static", setup: func(w *world) { w.add(admin, "crm", "crm", nil) }, want: "crm"},
		{name: "none", code: toolplane.CodeConnectionRequired},
		{name: "another provider's only", setup: func(w *world) { w.add(admin, "mail", "mail", nil) }, code: toolplane.CodeConnectionRequired},
		{name: "another organization's only", setup: func(w *world) { w.add(stranger, "crm", "crm", nil) }, code: toolplane.CodeConnectionRequired},
		{name: "two shared", setup: func(w *world) {
			w.add(admin, "crm-a", "crm", nil)
			w.add(admin, "crm-b", "crm", nil)
		}, code: toolplane.CodeConnectionAmbiguous, names: []string{"crm-a", "crm-b"}},
		{name: "two shared, one chosen", setup: func(w *world) {
			w.add(admin, "crm-a", "crm", nil)
			w.add(admin, "crm-b", "crm", nil)
		}, args: pick("crm-b"), want: "crm-b"},
		{name: "two shared, one revoked", setup: func(w *world) {
			w.add(admin, "crm-a", "crm", nil)
			w.add(admin, "crm-b", "crm", nil)
			w.setState("crm-a", toolplane.ConnectionRevoked)
		}, want: "crm-b"},
		{name: "chosen of another provider", setup: func(w *world) {
			w.add(admin, "crm", "crm", nil)
			w.add(admin, "mail", "mail", nil)
		}, args: pick("mail"), code: toolplane.CodeConnectionRequired},
		{name: "chosen of another organization", setup: func(w *world) {
			w.add(admin, "crm", "crm", nil)
			w.add(stranger, "crm-other", "crm", nil)
		}, args: pick("crm-other"), code: toolplane.CodeConnectionRequired},
		{name: "chosen of another person", setup: func(w *world) {
			w.add(admin, "crm", "crm", nil)
			w.own("kim", "crm-kim", "crm")
		}, user: "sam", args: pick("crm-kim"), code: toolplane.CodeConnectionRequired},
		{name: "chosen revoked", setup: func(w *world) {
			w.add(admin, "crm-a", "crm", nil)
			w.add(admin, "crm-b", "crm", nil)
			w.setState("crm-b", toolplane.ConnectionRevoked)
		}, args: pick("crm-b"), code: toolplane.CodeConnectionRevoked},
		{name: "the person's own before the shared", setup: func(w *world) {
			w.add(admin, "crm", "crm", nil)
			w.own("sam", "crm-sam", "crm")
			w.own("kim", "crm-kim", "crm")
		}, user: "sam", want: "crm-sam"},
		{name: "another person's is never borrowed", setup: func(w *world) {
			w.add(admin, "crm", "crm", nil)
			w.own("kim", "crm-kim", "crm")
		}, user: "sam", want: "crm"},
		{name: "needs reauthorization", setup: func(w *world) {
			w.add(admin, "crm", "crm", nil)
			w.setState("crm", toolplane.ConnectionNeedsReauth)
		}, code: toolplane.CodeConnectionExpired, names: []string{"crm"}},
		{name: "one active beside one needing reauthorization", setup: func(w *world) {
			w.add(admin, "crm-a", "crm", nil)
			w.add(admin, "crm-b", "crm", nil)
			w.setState("crm-a", toolplane.ConnectionNeedsReauth)
		}, want: "crm-b"},
		{name: "the person's own needing reauthorization before the shared", setup: func(w *world) {
			w.add(admin, "crm", "crm", nil)
			w.own("sam", "crm-sam", "crm")
			w.setState("crm-sam", toolplane.ConnectionNeedsReauth)
		}, user: "sam", code: toolplane.CodeConnectionExpired, names: []string{"crm-sam"}},
		{name: "revoked", setup: func(w *world) {
			w.add(admin, "crm", "crm", nil)
			w.setState("crm", toolplane.ConnectionRevoked)
		}, code: toolplane.CodeConnectionRevoked, names: []string{"crm"}},
		{name: "tool pattern admits", setup: func(w *world) {
			w.add(admin, "crm", "crm", scoped(toolplane.ConnectionScope{Tools: []string{"crm.*"}}))
		}, want: "crm"},
		{name: "tool pattern refuses", setup: func(w *world) {
			w.add(admin, "crm", "crm", scoped(toolplane.ConnectionScope{Tools: []string{"crm.list", "crm.get*"}}))
		}, code: toolplane.CodeDenied},
		{name: "agent admitted", setup: func(w *world) {
			w.add(admin, "crm", "crm", scoped(toolplane.ConnectionScope{Agents: []string{"agent-0", "agent-1"}}))
		}, want: "crm"},
		{name: "agent refused", setup: func(w *world) {
			w.add(admin, "crm", "crm", scoped(toolplane.ConnectionScope{Agents: []string{"agent-2"}}))
		}, code: toolplane.CodeDenied},
		{name: "amount below", setup: func(w *world) { w.add(admin, "crm", "crm", limit) }, args: pay(json.Number("999")), want: "crm"},
		{name: "amount equal", setup: func(w *world) { w.add(admin, "crm", "crm", limit) }, args: pay(json.Number("1000")), want: "crm"},
		{name: "amount above", setup: func(w *world) { w.add(admin, "crm", "crm", limit) }, args: pay(json.Number("1001")), code: toolplane.CodeDenied},
		{name: "amount far above", setup: func(w *world) { w.add(admin, "crm", "crm", limit) }, args: pay(json.Number("99999999999999999999999")), code: toolplane.CodeDenied},
		{name: "amount as an exponent", setup: func(w *world) { w.add(admin, "crm", "crm", limit) }, args: pay(json.Number("1e6")), code: toolplane.CodeDenied},
		{name: "amount fractional", setup: func(w *world) { w.add(admin, "crm", "crm", limit) }, args: pay(json.Number("1000.5")), code: toolplane.CodeDenied},
		{name: "amount as float", setup: func(w *world) { w.add(admin, "crm", "crm", limit) }, args: pay(1000.0), want: "crm"},
		{name: "amount as float above", setup: func(w *world) { w.add(admin, "crm", "crm", limit) }, args: pay(1000.5), code: toolplane.CodeDenied},
		{name: "amount named otherwise", setup: func(w *world) {
			w.add(admin, "crm", "crm", scoped(toolplane.ConnectionScope{MaxAmountCentsPerCall: 1000, AmountArgument: "total"}))
		}, args: func(*world) any {
			return map[string]any{"total": json.Number("5000"), "amount_cents": json.Number("1")}
		}, code: toolplane.CodeDenied},
		{name: "host allowed", setup: func(w *world) { w.add(admin, "crm", "crm", nil) }, tool: httpTool("api.crm.test"), want: "crm"},
		{name: "host not allowed", setup: func(w *world) { w.add(admin, "crm", "crm", nil) }, tool: httpTool("evil.test"), code: toolplane.CodeDenied},
		{name: "a path under an allowed base URL", setup: func(w *world) {
			w.add(admin, "crm", "crm", func(in *connection.Input) { in.Config.BaseURL = "https://api.crm.test/v2" })
		}, tool: pathTool, want: "crm"},
		{name: "a path under a base URL not allowed", setup: func(w *world) {
			w.add(admin, "crm", "crm", func(in *connection.Input) { in.Config.BaseURL = "https://evil.test" })
		}, tool: pathTool, code: toolplane.CodeDenied},
		{name: "a path without a base URL", setup: func(w *world) { w.add(admin, "crm", "crm", nil) }, tool: pathTool, code: toolplane.CodeDenied},
		{name: "metadata address", setup: func(w *world) {
			w.add(admin, "crm", "crm", func(in *connection.Input) { in.Config.Egress.Hosts = []string{"169.254.169.254"} })
		}, tool: httpTool("169.254.169.254"), code: toolplane.CodeDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			w := &world{e: e, s: e.service("n1"), ids: map[string]string{}, toks: map[string]string{}}
			if tc.setup != nil {
				tc.setup(w)
			}
			d := tc.tool
			if d == nil {
				d = crmRead
			}
			var args any = map[string]any{}
			if tc.args != nil {
				args = tc.args(w)
			}
			r, err := e.release(w.s, call(tc.user), d, args)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("Release = %v, want %s", err, tc.want)
				}
				if r.Connection.ID != w.ids[tc.want] || r.Secrets.Token.Reveal() != w.toks[tc.want] {
					t.Fatalf("released %s, want %s with its token", r.Connection.ID, w.ids[tc.want])
				}
				if r.Connection.Secret != nil {
					t.Errorf("the release carries the sealed secret")
				}
				return
			}
			ce := connErr(t, err, tc.code)
			for _, name := range tc.names {
				if !strings.Contains(ce.Message, w.ids[name]) {
					t.Errorf("message %q does not name %s", ce.Message, w.ids[name])
				}
			}
			if r != nil {
				t.Errorf("a refusal released %v", r.Connection)
			}
		})
	}
}

// TestReleaseRevokedOnAnotherNode revokes on one node a connection
// another node has released and keeps in memory: the other's very next
// call is refused. On SQLite the two services share the one node's
// store; on PostgreSQL each is a node of its own, with its own pool and
// its own listener, and the revocation's answer waits until the other
// node has heard of it or stopped trusting its memory.
func TestReleaseRevokedOnAnotherNode(t *testing.T) {
	t.Parallel()
	for _, backend := range backends(t) {
		t.Run(backend.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			node := backend.nodes(t, e)
			a := e.serviceWith("n1", node(), e.keys)
			b := e.serviceWith("n2", node(), e.keys)
			d := tool("crm.read", "crm")
			for round := range 3 {
				c := e.create(a, admin, static(fmt.Sprintf("crm-%d", round), "crm", secretToken("crm")))
				chosen := map[string]any{connection.ChoiceArgument: c.ID}
				for range 3 { // opened and kept in n2's memory
					for _, args := range []any{nil, chosen} {
						if _, err := e.release(b, call(""), d, args); err != nil {
							t.Fatal(err)
						}
					}
				}
				if _, err := a.Revoke(t.Context(), admin, c.ID, "leaked"); err != nil {
					t.Fatal(err)
				}
				_, err := e.release(b, call(""), d, nil)
				connErr(t, err, toolplane.CodeConnectionRevoked)
				_, err = e.release(b, call(""), d, chosen)
				connErr(t, err, toolplane.CodeConnectionRevoked)
			}
		})
	}
}

// TestReleaseAfterManyRevoked finds the organization's connection among
// more revoked ones of its provider than a page holds: a connection
// rotated often, each time revoked and created again.
func TestReleaseAfterManyRevoked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service("n1")
	for i := range 60 {
		c := e.create(s, admin, static(fmt.Sprintf("crm-%d", i), "crm", secretToken("old")))
		if _, err := s.Revoke(t.Context(), admin, c.ID, "rotated"); err != nil {
			t.Fatal(err)
		}
	}
	tok := secretToken("current")
	c := e.create(s, admin, static("crm", "crm", tok))
	r, err := e.release(s, call(""), tool("crm.read", "crm"), nil)
	if err != nil {
		t.Fatalf("Release = %v, want %s", err, c.ID)
	}
	if r.Connection.ID != c.ID || r.Secrets.Token.Reveal() != tok {
		t.Errorf("released %s, want %s", r.Connection.ID, c.ID)
	}
}

// TestReleaseQuotesOnlyAConnectionID: a connection_id that names no
// connection the call may use is refused, and the refusal the model reads
// as the platform's own words quotes it only when it is a connection's
// ID: any other text (a line break, a value the model was tricked into
// sending) is not repeated back.
func TestReleaseQuotesOnlyAConnectionID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service("n1")
	other := e.create(s, admin, static("erp", "erp", secretToken("erp")))
	e.create(s, admin, static("crm", "crm", secretToken("crm")))
	planted := secretToken("argument")
	e.plant(planted)
	for _, tt := range []struct {
		name, id string
		quoted   bool
	}{
		{"another provider's connection", other.ID, true},
		{"an unknown connection", "con_0123456789abcdef", true},
		{"a line break and a header", "con_x\r\nAuthorization: Bearer " + planted, false},
		{"a value that is no ID", planted, false},
		{"a long value", "con_" + strings.Repeat("a", 300), false},
	} {
		_, err := e.release(s, call(""), tool("crm.read", "crm"), map[string]any{connection.ChoiceArgument: tt.id})
		ce := connErr(t, err, toolplane.CodeConnectionRequired)
		if got := strings.Contains(ce.Message, tt.id); got != tt.quoted {
			t.Errorf("%s: quoted %t, want %t: %q", tt.name, got, tt.quoted, ce.Message)
		}
		if strings.ContainsAny(ce.Message, "\r\n") {
			t.Errorf("%s: the message holds a line break: %q", tt.name, ce.Message)
		}
	}
	e.scan()
}

// TestReleaseEgressChangedOnAnotherNode: the hosts a connection allows are
// those of the stored connection's version, so rules narrowed by a write
// to the store (not through the service) refuse the next call of a node
// that checked the old rules many times, and widened ones admit it.
func TestReleaseEgressChangedOnAnotherNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.service("n1")
	b := e.service("n2")
	c := e.create(a, admin, static("crm", "crm", secretToken("crm")))
	d := tool("crm.send", "crm")
	d.Binding.HTTP = &toolplane.HTTPBinding{Method: "POST", URL: "https://api.crm.test/v1/messages"}
	setHosts := func(hosts ...string) {
		t.Helper()
		stored, _ := e.stored(org, c.ID)
		stored.Config.Egress.Hosts = hosts
		if ok, err := e.store.UpdateConnection(t.Context(), stored, nil); !ok || err != nil {
			t.Fatalf("update the egress rules: %t, %v", ok, err)
		}
	}
	for _, tt := range []struct {
		hosts []string
		code  toolplane.Code // "" when released
	}{
		{nil, ""}, // as created: api.crm.test
		{[]string{"other.crm.test"}, toolplane.CodeDenied},
		{[]string{"*.crm.test"}, ""},
	} {
		if tt.hosts != nil {
			setHosts(tt.hosts...)
		}
		for range 3 {
			_, err := e.release(b, call(""), d, nil)
			if tt.code == "" && err != nil {
				t.Fatalf("hosts %v: Release = %v, want the connection", tt.hosts, err)
			}
			if tt.code != "" {
				connErr(t, err, tt.code)
			}
		}
	}
}

// TestReleaseKeptBeforeTheWatch: what the broker read before it followed
// the store's changes is not trusted once it does, since a change may
// have come between: a connection revoked meanwhile is refused.
func TestReleaseKeptBeforeTheWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin0 := e.service("n0")
	c := e.create(admin0, admin, static("crm", "crm", secretToken("crm")))
	s := newService(t, connection.Config{Store: e.store, Keys: e.keys, BaseURL: baseURL, Node: "n1"})
	for range 3 { // read, and kept though not trusted yet
		if _, err := e.release(s, call(""), tool("crm.read", "crm"), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Revoked where s is not told: by a store s does not watch yet.
	other := sqlitetest.Open(t, e.path)
	stored, _ := e.stored(org, c.ID)
	stored.State, stored.RevokedAt, stored.Secret = toolplane.ConnectionRevoked, e.clock.Now(), []byte{}
	if ok, err := other.UpdateConnection(t.Context(), stored, nil); !ok || err != nil {
		t.Fatalf("revoke: %t, %v", ok, err)
	}
	watch(t, s.Broker, e.store)
	_, err := e.release(s, call(""), tool("crm.read", "crm"), nil)
	connErr(t, err, toolplane.CodeConnectionRevoked)
}
