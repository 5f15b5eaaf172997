package connection_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/egress"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// baseURL is the deployment's public base URL in these tests. Nothing
// listens there: the provider's redirect to its callback is read, never
// requested.
const baseURL = "https://toolplane.test"

// The organizations of these tests.
const (
	org      = "org_acme"
	otherOrg = "org_other"
)

// The credentials of these tests: the organization's administrator, its
// auditor, two people without roles, an agent's key, and another
// organization's administrator.
var (
	admin    = &toolplane.Credential{ID: "tpk_admin", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RolePlatformAdmin}}
	auditor  = &toolplane.Credential{ID: "tpk_audit", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "aud", Roles: []string{toolplane.RoleAuditor}}
	sam      = &toolplane.Credential{ID: "tpk_sam", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "sam"}
	kim      = &toolplane.Credential{ID: "tpk_kim", OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "kim"}
	agentKey = &toolplane.Credential{ID: "tpk_agent", OrganizationID: org, Kind: toolplane.CredentialAgent, Subject: "agent-1", Roles: []string{toolplane.RolePlatformAdmin}}
	stranger = &toolplane.Credential{ID: "tpk_other", OrganizationID: otherOrg, Kind: toolplane.CredentialPerson, Subject: "sam", Roles: []string{toolplane.RolePlatformAdmin}}
)

// clock is the services' clock: real time moved by an offset a test sets.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Set puts the clock d after real time.
func (c *clock) Set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = d
}

// Advance moves the clock forward by d.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// counts are the HTTP requests the services of a test sent, by URL path.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) at(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

// counter is a transport counting into counts what it carries.
type counter struct {
	next   http.RoundTripper
	counts *counts
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.counts.mu.Lock()
	c.counts.n[r.URL.Path]++
	c.counts.mu.Unlock()
	return c.next.RoundTrip(r)
}

// env is one test's world: a SQLite store on a file of its own, a
// keyring, a clock, and what the services answered and logged. When the
// test ends it checks that no secret the test planted or was given
// appears in any of it, nor in the change log.
type env struct {
	t     *testing.T
	path  string
	store *sqlite.Store
	keys  *secret.Keyring
	clock *clock
	logs  *syncbuf.Buffer

	requests *counts

	mu      sync.Mutex
	secrets []string
	shown   []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{
		t: t, path: filepath.Join(t.TempDir(), "toolplane.db"), keys: ring(t, "k1"),
		clock: &clock{}, logs: &syncbuf.Buffer{}, requests: &counts{n: map[string]int{}},
	}
	e.store = sqlitetest.Open(t, e.path)
	t.Cleanup(e.scan)
	return e
}

// ring answers a keyring of fresh keys under the ids given, the first
// current.
func ring(t testing.TB, ids ...string) *secret.Keyring {
	t.Helper()
	var text strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&text, "%s %s\n", id, newKey())
	}
	k, err := secret.ParseKeyring(text.String())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newKey() string {
	b := make([]byte, secret.KeySize)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// service is one node's connections service: its administration and its
// broker, sharing what the node keeps.
type service struct {
	*connection.Admin
	*connection.Broker
}

// newService answers the service of cfg.
func newService(t testing.TB, cfg connection.Config) *service {
	t.Helper()
	a, b, err := connection.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &service{a, b}
}

// service answers a service on e's store, as the node named, with e's
// keys.
func (e *env) service(node string) *service {
	e.t.Helper()
	return e.serviceWith(node, e.store, e.keys)
}

// serviceWith answers a service on the store and keys given. Its token
// requests go through the connection's egress rules, and are counted.
func (e *env) serviceWith(node string, store connection.Store, keys *secret.Keyring) *service {
	e.t.Helper()
	return e.serviceOf(connection.Config{Store: store, Keys: keys, Node: node})
}

// serviceOf answers a service of cfg, completed as serviceWith does.
func (e *env) serviceOf(cfg connection.Config) *service {
	e.t.Helper()
	cfg.BaseURL, cfg.Now = baseURL, e.clock.Now
	s := newService(e.t, connection.Config{
		Store: cfg.Store, Keys: cfg.Keys, BaseURL: cfg.BaseURL, Node: cfg.Node, Now: cfg.Now,
		Vault: cfg.Vault, VaultTTL: cfg.VaultTTL, Roles: cfg.Roles,
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Client: func(rules toolplane.EgressRules) (*http.Client, error) {
			p, err := egress.Compile(rules)
			if err != nil {
				return nil, err
			}
			hc := p.Client(10 * time.Second)
			hc.Transport = &counter{next: hc.Transport, counts: e.requests}
			return hc, nil
		},
	})
	watch(e.t, s.Broker, cfg.Store)
	return s
}

// watch has s follow store's changes until t ends, as a server does, and
// waits until s trusts what it keeps: the calls of the test run against
// the broker's memory of the store. A store that tells no changes leaves
// s reading it on every call.
func watch(t testing.TB, s *connection.Broker, store connection.Store) {
	t.Helper()
	if _, ok := store.(toolplane.ConnectionFeed); !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	for deadline := time.Now().Add(10 * time.Second); !s.Remembering(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the broker never trusted its memory of the store")
		}
	}
}

// count answers how many requests the services sent to path.
func (e *env) count(path string) int { return e.requests.at(path) }

// plant notes secret values that must never be shown.
func (e *env) plant(values ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range values {
		if v != "" {
			e.secrets = append(e.secrets, v)
		}
	}
}

// saw notes what a service answered: an error's text, or a value's JSON.
func (e *env) saw(v any) {
	e.t.Helper()
	var text string
	switch x := v.(type) {
	case nil:
		return
	case error:
		text = x.Error()
		var ce *toolplane.ConnectionError
		if errors.As(x, &ce) {
			text += " " + ce.AuthorizationURL
		}
	default:
		b, err := json.Marshal(x)
		if err != nil {
			e.t.Errorf("marshal %T: %v", v, err)
			return
		}
		text = string(b)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shown = append(e.shown, text)
}

// scan fails the test when a planted secret shows in an answer, a log
// line or a change-log record.
func (e *env) scan() {
	t := e.t
	places := map[string]string{"log": e.logs.String()}
	e.mu.Lock()
	for i, s := range e.shown {
		places[fmt.Sprintf("answer %d", i)] = s
	}
	secrets := append([]string(nil), e.secrets...)
	e.mu.Unlock()
	for _, o := range []string{org, otherOrg} {
		after := ""
		for {
			// t.Context has ended when cleanups run.
			chs, next, err := e.store.ListChanges(context.Background(), o, "", "", after, 100)
			if err != nil {
				t.Errorf("list changes: %v", err)
				break
			}
			for _, ch := range chs {
				places["change "+ch.ID] = string(ch.Detail)
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	if len(secrets) == 0 {
		return
	}
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("a secret shows in the %s: %.300s", where, text)
			}
		}
	}
}

// create creates a connection that must be created.
func (e *env) create(s *service, by *toolplane.Credential, in connection.Input) *toolplane.Connection {
	e.t.Helper()
	e.plant(in.Secrets.Token.Reveal(), in.Secrets.Password.Reveal(), in.Secrets.DSN.Reveal(), in.Secrets.ClientSecret.Reveal())
	c, err := s.Create(e.t.Context(), by, in)
	e.saw(c)
	e.saw(err)
	if err != nil {
		e.t.Fatalf("Create %s: %v", in.Name, err)
	}
	return c
}

// release asks s for the connection of a call of tool made by inv with
// args, noting what it answered.
func (e *env) release(s *service, inv *toolplane.Invocation, tool *toolplane.Definition, args any) (*toolplane.Released, error) {
	e.t.Helper()
	r, err := s.Release(e.t.Context(), invoke.Release{Invocation: inv, Tool: tool, Arguments: args})
	e.saw(err)
	if r != nil {
		e.saw(r.Connection)
		e.saw(r.Secrets)
		e.plant(r.Secrets.AccessToken.Reveal(), r.Secrets.RefreshToken.Reveal())
	}
	return r, err
}

// personal stores a person's own connection directly: the state an
// authorization completed leaves.
func (e *env) personal(o, user, provider, name, tok string) *toolplane.Connection {
	e.t.Helper()
	e.plant(tok)
	now := e.clock.Now()
	c := &toolplane.Connection{
		ID: toolplane.NewID("con_"), OrganizationID: o, Name: name, Provider: provider,
		Kind: toolplane.ConnectionStatic, UserID: user, State: toolplane.ConnectionActive,
		Owner: user, CreatedAt: now, UpdatedAt: now,
	}
	var err error
	if c.Secret, err = secret.SealSecrets(e.keys, o, c.ID, toolplane.Secrets{Token: toolplane.SecretString(tok)}); err != nil {
		e.t.Fatal(err)
	}
	ch := &toolplane.Change{ID: toolplane.NewID("chg_"), OrganizationID: o, Kind: "connection.consent", Subject: c.ID, Actor: user, CreatedAt: now}
	if err := e.store.InsertConnection(e.t.Context(), c, ch); err != nil {
		e.t.Fatal(err)
	}
	return c
}

// stored answers the connection as the store holds it, with its secrets
// opened.
func (e *env) stored(o, id string) (*toolplane.Connection, toolplane.Secrets) {
	e.t.Helper()
	c, err := e.store.GetConnection(e.t.Context(), o, id)
	if err != nil {
		e.t.Fatalf("get connection %s: %v", id, err)
	}
	sec, err := secret.OpenSecrets(e.keys, o, id, c.Secret)
	if err != nil {
		e.t.Fatalf("open connection %s: %v", id, err)
	}
	e.plant(sec.AccessToken.Reveal(), sec.RefreshToken.Reveal())
	return c, sec
}

// connErr answers err as a *ConnectionError of code, failing the test
// when it is not one.
func connErr(t *testing.T, err error, code toolplane.Code) *toolplane.ConnectionError {
	t.Helper()
	var ce *toolplane.ConnectionError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ConnectionError %s", err, code)
	}
	if ce.Code != code {
		t.Fatalf("code = %s (%s), want %s", ce.Code, ce.Message, code)
	}
	return ce
}

// static is the input of a shared bearer connection to provider.
func static(name, provider, tok string) connection.Input {
	return connection.Input{
		Name: name, Provider: provider, Kind: toolplane.ConnectionStatic,
		Config:  toolplane.ConnectionConfig{Egress: toolplane.EgressRules{Hosts: []string{"api.crm.test"}}},
		Secrets: toolplane.Secrets{Token: toolplane.SecretString(tok)},
	}
}

// tool is a tool declaring provider's connection.
func tool(name, provider string) *toolplane.Definition {
	return &toolplane.Definition{Name: name, Connection: provider}
}

// call is a call made by agent-1 of the organization for user ("" for
// none).
func call(user string) *toolplane.Invocation {
	return &toolplane.Invocation{OrganizationID: org, UserID: user, AgentID: "agent-1", RunID: "run_1"}
}

// secretToken answers a distinctive secret value, named for where it was
// planted.
func secretToken(what string) string { return "sk-" + what + "-" + rand.Text() }

// releaseOf is the broker's request for a call.
func releaseOf(inv *toolplane.Invocation, d *toolplane.Definition, args any) invoke.Release {
	return invoke.Release{Invocation: inv, Tool: d, Arguments: args}
}
