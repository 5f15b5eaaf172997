package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// keyText answers a fresh key-encryption key, base64.
func keyText(t *testing.T) string {
	t.Helper()
	key := make([]byte, secret.KeySize)
	rand.Read(key)
	return base64.StdEncoding.EncodeToString(key)
}

func parseRing(t *testing.T, text string) *secret.Keyring {
	t.Helper()
	k, err := secret.ParseKeyring(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// connServer is a server with the connections service, in process, over
// a SQLite store.
type connServer struct {
	base  string
	store *sqlite.Store
	ring  *secret.Keyring
	// admin administers org-1; ada is a person of it; agent an agent.
	admin, ada, agent string
}

func mintKey(t *testing.T, s *sqlite.Store, kind toolplane.CredentialKind, subject string, roles, tools []string) string {
	t.Helper()
	id, sec, err := apikey.New(kind)
	if err != nil {
		t.Fatal(err)
	}
	c := &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: kind, Subject: subject, Roles: roles, Tools: tools,
		Hash: apikey.Hash(sec), CreatedAt: time.Now()}
	if err := s.InsertCredential(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return apikey.Key(id, sec)
}

func startConnServer(t *testing.T) connServer {
	t.Helper()
	store, _ := sqlitetest.NewDB(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	ring := parseRing(t, "k1 "+keyText(t))
	conns, _, err := connection.New(connection.Config{Store: store, Keys: ring, BaseURL: base, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api := &httpapi.Server{Door: &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}, Store: store, Log: quiet, Connections: conns}
	srv.Config.Handler = api.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return connServer{base: base, store: store, ring: ring,
		admin: mintKey(t, store, toolplane.CredentialPerson, "root", []string{toolplane.RolePlatformAdmin}, nil),
		ada:   mintKey(t, store, toolplane.CredentialPerson, "ada", nil, nil),
		agent: mintKey(t, store, toolplane.CredentialAgent, "agent-support", nil, []string{"demo.*"}),
	}
}

// opened answers the secrets the server stored for connection id.
func (s connServer) opened(t *testing.T, id string) toolplane.Secrets {
	t.Helper()
	c, err := s.store.GetConnection(context.Background(), "org-1", id)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := secret.OpenSecrets(s.ring, "org-1", id, c.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func TestConnectionsThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	s := startConnServer(t)
	dir := t.TempDir()
	planted := "tok-planted-" + rand.Text()
	dsnFile := filepath.Join(dir, "dsn")
	dsn := "postgres://svc:pw-" + rand.Text() + "@db.test/warehouse"
	if err := os.WriteFile(dsnFile, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clientSecretFile := filepath.Join(dir, "client-secret")
	if err := os.WriteFile(clientSecretFile, []byte("cs-"+rand.Text()), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TOOLPLANE_SERVER": s.base, "TOOLPLANE_KEY": s.admin, "ACME_TOKEN": planted}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		code, out, errOut := runIn(env, args...)
		for _, leak := range []string{planted, dsn} {
			if strings.Contains(out, leak) || strings.Contains(errOut, leak) {
				t.Errorf("%v printed a secret:\n%s\n%s", args, out, errOut)
			}
		}
		return code, out, errOut
	}

	// A bearer connection, its token from the environment.
	code, out, errOut := cli("connections", "create", "--name", "acme", "--provider", "acme", "--kind", "static",
		"--token-env", "ACME_TOKEN", "--host", "api.acme.test", "--allow-cidr", "127.0.0.1/32", "--tool", "acme.*",
		"--agent", "agent-support", "--max-amount-cents", "5000", "-o", "json")
	if code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	var created struct {
		Connection toolplane.Connection `json:"connection"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	acme := created.Connection
	if strings.Contains(errOut, "warning") {
		t.Errorf("a connection naming its hosts is warned about: %s", errOut)
	}
	if acme.Config.Egress.Hosts[0] != "api.acme.test" || acme.Config.Egress.AllowCIDRs[0] != "127.0.0.1/32" ||
		acme.Scope.Tools[0] != "acme.*" || acme.Scope.Agents[0] != "agent-support" || acme.Scope.MaxAmountCentsPerCall != 5000 {
		t.Errorf("created %+v", acme)
	}
	if got := s.opened(t, acme.ID); got.Token.Reveal() != planted {
		t.Errorf("the stored token is not the one in $ACME_TOKEN")
	}

	// A SQL connection, its DSN from a file (its newline dropped).
	code, out, errOut = cli("connections", "create", "--name", "warehouse", "--provider", "warehouse", "--kind", "static",
		"--driver", "postgres", "--dsn-file", dsnFile, "--host", "db.test", "--allow-privileged-role", "-o", "field=connection.id")
	if code != 0 {
		t.Fatalf("create sql: %d %s %s", code, out, errOut)
	}
	warehouse := strings.TrimSpace(out)
	if got := s.opened(t, warehouse); got.DSN.Reveal() != dsn {
		t.Errorf("the stored DSN is not the file's")
	}
	// The operator's acceptance of a privileged database role is shown.
	if code, out, errOut := cli("connections", "show", warehouse, "-o", "field=connection.config.allow_privileged_role"); code != 0 || strings.TrimSpace(out) != "true" {
		t.Errorf("show: %d %q %q, want the acceptance shown", code, out, errOut)
	}
	if code, out, _ := cli("connections", "list", "--provider", "warehouse"); code != 0 || !strings.Contains(out, "ALLOW_PRIVILEGED_ROLE") || !strings.Contains(out, "true") {
		t.Errorf("list: %d %q, want the acceptance in its column", code, out)
	}

	// A connection whose egress allows no host is created, and the
	// administrator is warned, apart from the answer, that every call
	// through it will be refused.
	code, out, errOut = cli("connections", "create", "--name", "nowhere", "--provider", "nowhere", "--kind", "static",
		"--token-env", "ACME_TOKEN", "-o", "field=connection.id")
	if code != 0 || !strings.HasPrefix(out, "con_") || !strings.Contains(errOut, "warning: config.egress.hosts is empty: every call through this connection will be refused") {
		t.Errorf("create without --host: %d %q %q, want the connection and a warning", code, out, errOut)
	}
	if code, out, errOut := cli("connections", "create", "--name", "local-db", "--provider", "localdb", "--kind", "static",
		"--driver", "sqlite", "--dsn-file", dsnFile, "-o", "field=connection.id"); code != 0 || strings.Contains(errOut, "warning") {
		t.Errorf("a SQLite connection, which needs no host: %d %q %q", code, out, errOut)
	}

	// An OAuth application people connect their accounts to.
	code, out, errOut = cli("connections", "create", "--name", "crm-app", "--provider", "crm", "--kind", "oauth2_authorization_code",
		"--issuer", "https://auth.crm.test", "--client-id", "toolplane", "--client-secret-file", clientSecretFile,
		"--scope", "openid", "--scope", "offline_access", "--host", "auth.crm.test", "-o", "field=connection.id")
	if code != 0 {
		t.Fatalf("create app: %d %s %s", code, out, errOut)
	}
	app := strings.TrimSpace(out)

	// Refusals: a secret not found, two sources, a kind unknown, a
	// connection the server refuses at its field, an agent's key.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--token-env", "NOT_SET"}, 2, "$NOT_SET is not set"},
		{[]string{"--token-env", "ACME_TOKEN", "--token-file", dsnFile}, 2, "give one of --token-env and --token-file"},
		{[]string{"--token-file", filepath.Join(dir, "absent")}, 2, "--token-file"},
		{[]string{"--kind", "magic"}, 2, "--kind: want static"},
		{nil, 1, "secrets.token"},
		{[]string{"--token-env", "ACME_TOKEN", "--key", s.agent}, 1, "platform_admin"},
		{[]string{"--token-env", "ACME_TOKEN", "--max-amount-cents", "-5"}, 2, "--max-amount-cents"},
	} {
		args := append([]string{"connections", "create", "--name", "other", "--provider", "acme", "--kind", "static"}, c.args...)
		code, out, errOut := cli(args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %q %q, want %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
	if code, _, errOut := cli("connections", "create", "--name", "x", "--provider", "x"); code != 2 || !strings.Contains(errOut, `"kind" not set`) {
		t.Errorf("without --kind: %d %s", code, errOut)
	}

	// list, show, revoke, authorize.
	code, out, errOut = cli("connections", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 6 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "PROVIDER") || !strings.Contains(out, acme.ID) {
		t.Errorf("list: %d %q %q", code, out, errOut)
	}
	code, out, _ = cli("connections", "list", "--provider", "warehouse", "-o", "field=id")
	if code != 0 || strings.TrimSpace(out) != warehouse {
		t.Errorf("list --provider: %d %q", code, out)
	}
	code, out, _ = cli("connections", "show", acme.ID, "-o", "field=connection.name")
	if code != 0 || strings.TrimSpace(out) != "acme" {
		t.Errorf("show: %d %q", code, out)
	}
	code, out, errOut = cli("connections", "revoke", warehouse, "--reason", "moved to the new warehouse", "-o", "json")
	if code != 0 || !strings.Contains(out, `"state": "revoked"`) || !strings.Contains(out, "moved to the new warehouse") {
		t.Errorf("revoke: %d %q %q", code, out, errOut)
	}
	code, out, _ = cli("connections", "list", "--state", "revoked", "-o", "field=id")
	if code != 0 || strings.TrimSpace(out) != warehouse {
		t.Errorf("list --state revoked: %d %q", code, out)
	}
	code, out, errOut = cli("connections", "authorize", app, "--key", s.ada, "-o", "field=authorization_url")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), s.base+connection.StartPath+"?state=") {
		t.Errorf("authorize: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := cli("connections", "show", "con_absent"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("show an unknown id: %d %q", code, errOut)
	}
}

// sealedUnder creates, at database, a connection of org-1 whose secret is
// sealed under ring, and answers its id.
func sealedUnder(t *testing.T, database string, ring *secret.Keyring, token string) string {
	t.Helper()
	ctx := context.Background()
	b, err := backend.Open(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	svc, _, err := connection.New(connection.Config{Store: b.Store, Keys: ring})
	if err != nil {
		t.Fatal(err)
	}
	admin := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "root", Roles: []string{toolplane.RolePlatformAdmin}}
	c, err := svc.Create(ctx, admin, connection.Input{Name: "acme-" + strings.ToLower(rand.Text()[:6]), Provider: "acme", Kind: toolplane.ConnectionStatic,
		Secrets: toolplane.Secrets{Token: toolplane.SecretString(token)}})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// openWith opens connection id's stored secret at database with ring.
func openWith(t *testing.T, database, id string, ring *secret.Keyring) (toolplane.Secrets, error) {
	t.Helper()
	ctx := context.Background()
	b, err := backend.Open(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := b.Store.GetConnection(ctx, "org-1", id)
	if err != nil {
		t.Fatal(err)
	}
	return secret.OpenSecrets(ring, "org-1", id, c.Secret)
}

func TestRotateKEK(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	database := filepath.Join(dir, "toolplane.db")
	keyA, keyB := keyText(t), keyText(t)
	ringA, ringB := parseRing(t, "a "+keyA), parseRing(t, "b "+keyB)
	token := "tok-planted-" + rand.Text()
	id := sealedUnder(t, database, ringA, token)
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	onlyB := write("only-b", "b "+keyB+"\n", 0o600)
	bThenA := "# b is new\nb " + keyB + "\na " + keyA + "\n"
	bThenAFile := write("b-then-a", bThenA, 0o600)
	private := func(out, errOut string) {
		t.Helper()
		for _, leak := range []string{keyA, keyB, token} {
			if strings.Contains(out, leak) || strings.Contains(errOut, leak) {
				t.Errorf("a key or a secret was printed:\n%s\n%s", out, errOut)
			}
		}
	}

	// A ring without the key the secret is under: nothing is rewrapped,
	// and the error names the key and what to do.
	code, out, errOut := runIn(nil, "keys", "rotate-kek", "--database", database, "--kek-file", onlyB)
	private(out, errOut)
	if code != 1 || !strings.Contains(errOut, `sealed under key(s) a, which the keyring (b) does not hold`) ||
		!strings.Contains(errOut, "Add those keys to the keyring after the new current key b") || !strings.Contains(errOut, id) {
		t.Fatalf("rotate with B alone: %d %q %q", code, out, errOut)
	}
	if _, err := openWith(t, database, id, ringA); err != nil {
		t.Fatalf("a failed rotation changed the secret: %v", err)
	}

	// No ring at all, and a file others may read, are refused.
	if code, _, errOut := runIn(nil, "keys", "rotate-kek", "--database", database); code != 1 || !strings.Contains(errOut, "TOOLPLANE_KEK") {
		t.Errorf("without a ring: %d %q", code, errOut)
	}
	open := write("open", bThenA, 0o644)
	if code, _, errOut := runIn(nil, "keys", "rotate-kek", "--database", database, "--kek-file", open); code != 1 || !strings.Contains(errOut, "chmod") {
		t.Errorf("a readable ring: %d %q", code, errOut)
	}

	// B then A, from $TOOLPLANE_KEK: rewrapped under B.
	code, out, errOut = runIn(map[string]string{"TOOLPLANE_KEK": bThenA}, "keys", "rotate-kek", "--database", database, "-o", "json")
	private(out, errOut)
	var report map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &report) != nil || report["rewrapped"] != float64(1) || report["current_key"] != "b" || report["failed"] != float64(0) {
		t.Fatalf("rotate with B then A: %d %q %q", code, out, errOut)
	}
	sec, err := openWith(t, database, id, ringB)
	if err != nil || sec.Token.Reveal() != token {
		t.Fatalf("B alone does not open the rotated secret: %v", err)
	}
	var unknown *secret.UnknownKeyError
	if _, err := openWith(t, database, id, ringA); !errors.As(err, &unknown) || unknown.ID != "b" {
		t.Errorf("A alone opens the rotated secret: %v", err)
	}

	// Again, from the file: nothing left to do.
	code, out, errOut = runIn(nil, "keys", "rotate-kek", "--database", database, "--kek-file", bThenAFile, "-o", "field=current")
	if code != 0 || strings.TrimSpace(out) != "1" {
		t.Errorf("rotate again: %d %q %q", code, out, errOut)
	}
}
