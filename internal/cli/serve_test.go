package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/certtest"
	"github.com/toolplane/toolplane/internal/server"
	"github.com/toolplane/toolplane/internal/syncbuf"
)

func TestServeDemoEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, []string{"--demo", "--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "data", "toolplane.db")}, &out, &errOut)
	}()
	addrRE := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+) `)
	var base string
	deadline := time.Now().Add(serveStartBound)
	for base == "" {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", out.String(), errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	creds, err := os.ReadFile(filepath.Join(dir, "data", "credentials.env"))
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Join(dir, "data", "credentials.env")); info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v", info.Mode())
	}
	for file, want := range map[string]os.FileMode{"data": 0o700, "data/toolplane.db": 0o600, "data/toolplane.db-wal": 0o600} {
		info, err := os.Stat(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", file, info.Mode().Perm(), want)
		}
	}
	agent := regexp.MustCompile(`TOOLPLANE_DEMO_AGENT_KEY=(\S+)`).FindStringSubmatch(string(creds))[1]
	callTool := func(tool, body string) (int, string) {
		req, _ := http.NewRequest("POST", base+"/v1/tools/"+tool+"/invoke", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+agent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	call := func(body string) (int, string) { return callTool("demo.add_note", body) }
	body := `{"arguments":{"ticket_id":"t-1001","text":"Replacement shipped."},"run_id":"run-1"}`
	if status, got := call(body); status != 200 || !strings.Contains(got, `"ok":true`) {
		t.Fatalf("first call: %d %s", status, got)
	}
	if status, got := call(body); status != 200 || !strings.Contains(got, `"replayed":true`) {
		t.Fatalf("second call: %d %s", status, got)
	}
	// A refund waits for a person: the pending gauge counts it.
	if status, got := callTool("demo.refund_order", `{"arguments":{"order_id":"o-501","amount_cents":100,"reason":"damaged"},"run_id":"run-1"}`); status != http.StatusAccepted {
		t.Fatalf("refund: %d %s", status, got)
	}
	// Metrics count the calls by tool and outcome.
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metricsText), `toolplane_tool_calls_total{agent="demo-agent",outcome="ok",tool="demo.add_note",version="1.0.0"} 2`) ||
		!strings.Contains(string(metricsText), `toolplane_approvals_pending{organization="default"} 1`) {
		t.Fatalf("metrics:\n%s", metricsText)
	}
	// The MCP endpoint is served beside the API, behind the same keys.
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("MCP without a key: %v %v", resp, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "toolplane stopped") {
			t.Fatalf("shutdown: %d %s %s", code, out.String(), errOut.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func TestServeRefusesToolsWithoutAHandler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut syncbuf.Buffer
	code := serve(context.Background(), []string{"--tools", "../../examples/tools", "--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "toolplane.db")}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "no handler is registered") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

// A program embedding toolplane (MainWith) completes the configuration
// serve's flags made, before the server is built from it.
func TestServeHandsItsConfigurationToTune(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut syncbuf.Buffer
	var seen time.Duration
	code := serve(context.Background(), []string{"--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "toolplane.db"), "--sweep-every", "7s"}, &out, &errOut,
		func(c *server.Config) {
			seen = c.SweepEvery
			c.Heartbeat = -time.Second // refused by the server, so the run stops before it opens anything
		})
	if seen != 7*time.Second {
		t.Errorf("tune saw SweepEvery %v, want the flag's 7s", seen)
	}
	if code != 1 || !strings.Contains(errOut.String(), "--heartbeat: -1s is negative") {
		t.Errorf("exit %d, stderr %q: the server was not built from the tuned configuration", code, errOut.String())
	}
}

// A setting the server cannot use is reported by the flag that set it,
// before the database is opened.
func TestServeNamesTheFlagOfABadSetting(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "server CA")
	files := t.TempDir()
	certFile := certtest.Write(t, files, "a.crt", ca.Issue(t, certtest.Leaf{Server: true}).CertPEM)
	otherKey := certtest.Write(t, files, "b.key", ca.Issue(t, certtest.Leaf{Server: true}).KeyPEM)
	tests := []struct {
		flags []string
		want  string
	}{
		{[]string{"--jwt-issuer", "https://issuer.example"}, "toolplane serve: --jwt-issuer needs --jwt-audience and --jwt-jwks-url\n"},
		{[]string{"--jwt-issuer", "https://issuer.example", "--jwt-audience", "toolplane"}, "toolplane serve: --jwt-issuer needs --jwt-audience and --jwt-jwks-url\n"},
		{[]string{"--heartbeat", "-1s"}, "toolplane serve: --heartbeat: -1s is negative (zero takes the default)\n"},
		{[]string{"--sweep-every", "-2s"}, "toolplane serve: --sweep-every: -2s is negative (zero takes the default)\n"},
		{[]string{"--async-stale-after", "-3s"}, "toolplane serve: --async-stale-after: -3s is negative (zero takes the default)\n"},
		{[]string{"--vault-token-file", "/x"}, "toolplane serve: --vault-token-file needs --vault-addr\n"},
		{[]string{"--vault-cache-ttl", "-1s"}, "toolplane serve: --vault-cache-ttl: -1s is negative (zero takes the default)\n"},
		{[]string{"--trusted-proxy", "10.0.0.0/8,proxy.internal"}, "toolplane serve: --trusted-proxy: a trusted proxy is an IP address or a CIDR prefix (10.0.0.0/8, fd00::/8), not \"proxy.internal\"\n"},
		{[]string{"--tls-cert", "/x.crt"}, "toolplane serve: --tls-cert needs --tls-key\n"},
		{[]string{"--client-cert-revoked", "/x"}, "toolplane serve: --client-cert-revoked needs --client-ca\n"},
		{[]string{"--oauth-external-issuer"}, "toolplane serve: --oauth-external-issuer needs --jwt-issuer\n"},
		{[]string{"--tls-cert", certFile, "--tls-key", otherKey}, "toolplane serve: --tls-cert: " + certFile + ", " + otherKey + ": the private key does not match the certificate\n"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		var out, errOut syncbuf.Buffer
		code := serve(context.Background(), append([]string{"--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "toolplane.db")}, tt.flags...), &out, &errOut)
		if code != 1 || errOut.String() != tt.want {
			t.Errorf("%q: exit %d, stderr %q; want 1, %q", tt.flags, code, errOut.String(), tt.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "toolplane.db")); !os.IsNotExist(err) {
			t.Errorf("%q: the database was opened: %v", tt.flags, err)
		}
	}
}

// Every field serveFlags names is a server.Config field, set by the flag
// it names.
func TestServeFlagsNameConfigFields(t *testing.T) {
	t.Parallel()
	fields := reflect.TypeFor[server.Config]()
	flags := map[string]bool{}
	var help bytes.Buffer
	serve(context.Background(), []string{"--help"}, &help, io.Discard)
	for _, line := range strings.Split(help.String(), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "--"); ok {
			name, _, _ := strings.Cut(f, " ")
			// A bool flag is shown as --name[=true|false].
			name, _, _ = strings.Cut(name, "[")
			flags["--"+name] = true
		}
	}
	for field, flag := range serveFlags {
		// A dotted name is a field of a field: Vault.Addr.
		typ, ok := fields, true
		for name := range strings.SplitSeq(field, ".") {
			var f reflect.StructField
			if f, ok = typ.FieldByName(name); !ok {
				break
			}
			typ = f.Type
		}
		if !ok {
			t.Errorf("serveFlags names %s, which server.Config lacks", field)
		}
		if !flags[flag] {
			t.Errorf("serveFlags names %s for %s, which serve does not define", flag, field)
		}
	}
}

// serve reads the environment the server is configured by (the server
// reads none): each variable below reaches the server, which refuses it
// beside the flag that gives the same thing, or as a value it cannot use.
func TestServePassesTheEnvironment(t *testing.T) {
	tests := []struct {
		env, value string
		flags      []string
		want       string
	}{
		{server.KEKEnv, "k1 AAAA", []string{"--kek-file", "kek"}, "--kek-file: TOOLPLANE_KEK is set too; give the keys one way"},
		{server.VaultTokenEnv, "token", []string{"--vault-addr", "https://vault.example", "--vault-token-file", "token"}, "both TOOLPLANE_VAULT_TOKEN and a vault token file"},
		{"OTEL_TRACES_EXPORTER", "zipkin", nil, `OTEL_TRACES_EXPORTER="zipkin"`},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			dir := t.TempDir()
			// A server that starts anyway stops, and answers 0.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out, errOut syncbuf.Buffer
			code := serve(ctx, append([]string{"--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "toolplane.db")}, tt.flags...), &out, &errOut)
			if code != 1 || !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut.String(), tt.want)
			}
		})
	}
}

// The retention flag reads days and durations, and refuses the rest.
func TestParseRetention(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"400d", 400 * 24 * time.Hour, true},
		{"0d", 0, true},
		{"9000h", 9000 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"d", 0, false},
		{"-3d", 0, false},
		{"-1h", 0, false},
		{"1.5d", 0, false},
		{"100000d", 0, false},
		{"forever", 0, false},
	} {
		got, err := parseRetention(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseRetention(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// FuzzParseRetention: whatever it is given, a retention read is never
// negative.
func FuzzParseRetention(f *testing.F) {
	for _, s := range []string{"400d", "9000h", "-1d", "1e9d", "d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseRetention(s); err == nil && d < 0 {
			t.Fatalf("parseRetention(%q) = %v", s, d)
		}
	})
}

// serveStartBound is how long a test waits for serve to say it serves: a
// new SQLite file migrated and every service started, under the race
// detector, beside the package's other servers starting at once on a
// loaded two-core machine (30 s was seen to run out there).
const serveStartBound = 2 * time.Minute

// --slack-api and --slack-hooks reach the server's configuration, and a
// value the notifications cannot use is reported by its flag.
func TestServeSlackAddresses(t *testing.T) {
	t.Parallel()
	var out, errOut syncbuf.Buffer
	var api, hooks string
	code := serve(context.Background(), []string{"--addr", "127.0.0.1:0", "--database", filepath.Join(t.TempDir(), "toolplane.db"),
		"--slack-api", "http://127.0.0.1:9/api", "--slack-hooks", "http://127.0.0.1:9/hooks/"}, &out, &errOut,
		func(c *server.Config) {
			api, hooks = c.SlackAPI, c.SlackHooks
			c.Heartbeat = -time.Second // refused by the server, so the run stops before it opens anything
		})
	if code != 1 || api != "http://127.0.0.1:9/api" || hooks != "http://127.0.0.1:9/hooks/" {
		t.Errorf("exit %d: tune saw --slack-api %q, --slack-hooks %q", code, api, hooks)
	}
	for _, tt := range []struct{ flag, value string }{
		{"--slack-hooks", "http://127.0.0.1:9/hooks"},
		{"--slack-api", "ftp://127.0.0.1:9/api"},
	} {
		var out, errOut syncbuf.Buffer
		code := serve(context.Background(), []string{"--addr", "127.0.0.1:0", "--database", filepath.Join(t.TempDir(), "toolplane.db"), tt.flag, tt.value}, &out, &errOut)
		if want := "toolplane serve: " + tt.flag + ": "; code != 1 || !strings.HasPrefix(errOut.String(), want) || !strings.Contains(errOut.String(), tt.value) {
			t.Errorf("%s %s: exit %d, stderr %q; want 1 and %q naming the value", tt.flag, tt.value, code, errOut.String(), want)
		}
	}
}
