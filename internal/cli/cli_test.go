package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"go.yaml.in/yaml/v3"
)

// runIn runs the command line with env as its whole environment, so tests
// with different environments and config files run in parallel.
func runIn(env map[string]string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := execute(&app{stdout: &out, stderr: &errOut, getenv: func(k string) string { return env[k] }}, args)
	return code, out.String(), errOut.String()
}

// commandPaths answers the path of every command in the tree.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var all [][]string
	for _, sub := range c.Commands() {
		if sub.Hidden {
			continue
		}
		p := append(append([]string{}, prefix...), sub.Name())
		all = append(all, p)
		all = append(all, commandPaths(sub, p)...)
	}
	return all
}

func TestHelpExitsZeroOnEveryCommand(t *testing.T) {
	t.Parallel()
	paths := append([][]string{{}}, commandPaths(newRoot(&app{stdout: io.Discard, stderr: io.Discard, getenv: os.Getenv}), nil)...)
	for _, p := range paths {
		for _, help := range []string{"--help", "-h"} {
			args := append(append([]string{}, p...), help)
			code, out, errOut := runIn(nil, args...)
			if code != 0 || !strings.Contains(strings.ToLower(out), "usage") || errOut != "" {
				t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
			}
		}
	}
	for _, name := range []string{"tools", "grants", "bundles", "approvals", "keys", "audit", "uncertain", "migrate", "config"} {
		if !slicesHas(paths, name) {
			t.Errorf("no %s command", name)
		}
	}
}

func slicesHas(paths [][]string, name string) bool {
	for _, p := range paths {
		if len(p) == 1 && p[0] == name {
			return true
		}
	}
	return false
}

func TestEachCommandHasItsOwnFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args      []string
		want, not []string
	}{
		{[]string{"tools", "publish", "--help"}, []string{"--server", "--key", "--output"}, []string{"--sunset", "--note", "--pattern"}},
		{[]string{"tools", "deprecate", "--help"}, []string{"--sunset", "--replacement", "--note"}, []string{"--pattern", "--owner"}},
		{[]string{"grants", "add", "--help"}, []string{"--pattern", "--bundle", "--tenant", "--expires"}, []string{"--reason", "--revoked", "--sunset"}},
		{[]string{"serve", "--help"}, []string{"--addr", "--demo", "--database", "--jwt-issuer", "--lease-margin"}, []string{"--server", "--key"}},
		{[]string{"lint", "--help"}, []string{"--args", "--output", "--handler"}, []string{"--server"}},
		{[]string{"migrate", "up", "--help"}, []string{"--database"}, []string{"--server"}},
	}
	for _, c := range cases {
		code, out, _ := runIn(nil, c.args...)
		if code != 0 {
			t.Errorf("%v: exit %d", c.args, code)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %s in\n%s", c.args, w, out)
			}
		}
		for _, n := range c.not {
			if strings.Contains(out, n) {
				t.Errorf("%v: another command's %s in\n%s", c.args, n, out)
			}
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{nil, "Usage"},
		{[]string{"sideways"}, `unknown command "sideways"`},
		{[]string{"tools"}, "Usage"},
		{[]string{"tools", "sideways"}, `unknown command "sideways" for "toolplane tools"`},
		{[]string{"grants", "sideways"}, `unknown command "sideways"`},
		{[]string{"migrate", "sideways"}, `unknown command "sideways"`},
		{[]string{"tools", "show", "only.a.name"}, "want NAME VERSION"},
		{[]string{"tools", "list", "--sideways"}, "unknown flag: --sideways"},
		{[]string{"tools", "list", "-o", "xml", "--key", "k"}, `-o "xml"`},
		{[]string{"keys", "create", "sam", "--key", "k"}, `"kind" not set`},
		{[]string{"uncertain", "reconcile", "t", "k", "--key", "k", "--unconfirmed", "x", "--failure", "not_found:x"}, "exactly one of"},
		{[]string{"lint"}, "at least one definition file"},
		{[]string{"serve", "--sideways"}, "unknown flag"},
		{[]string{"serve", "extra"}, "takes no arguments"},
	}
	for _, c := range cases {
		code, _, errOut := runIn(nil, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want 2 and %q in\n%s", c.args, code, c.want, errOut)
		}
	}
}

func TestVersionAndCompletion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "toolplane "},
		{[]string{"version", "-o", "json"}, `"go": "go1.`},
		{[]string{"completion", "bash"}, "bash completion"},
		{[]string{"completion", "zsh"}, "#compdef toolplane"},
		{[]string{"completion", "fish"}, "complete -c toolplane"},
		{[]string{"completion", "powershell"}, "Register-ArgumentCompleter"},
	}
	for _, c := range cases {
		code, out, errOut := runIn(nil, c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %q in\n%s\n%s", c.args, code, c.want, out, errOut)
		}
	}
}

// freePort answers a loopback URL nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}

func TestAnUnreachableServerIsNamedWithHowToChangeIt(t *testing.T) {
	t.Parallel()
	dead := freePort(t)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		from string
	}{
		{"flag", nil, []string{"tools", "list", "--key", "k", "--server", dead}, "(from --server)"},
		{"environment", map[string]string{"TOOLPLANE_SERVER": dead, "TOOLPLANE_KEY": "k"}, []string{"grants", "list"}, "(from $TOOLPLANE_SERVER)"},
	}
	for _, c := range cases {
		code, _, errOut := runIn(c.env, c.args...)
		want := "cannot reach toolplane at " + dead + " " + c.from + ": connection refused; start it with `toolplane serve` or point at another with --server / TOOLPLANE_SERVER / `toolplane login`"
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, want %q in\n%s", c.name, code, want, errOut)
		}
	}
	// With nothing configured, the default server is the one named.
	code, _, errOut := runIn(map[string]string{"HOME": t.TempDir()}, "keys", "list")
	if code != 2 || !strings.Contains(errOut, "no API key for "+DefaultServer) || !strings.Contains(errOut, "toolplane login") {
		t.Errorf("no key: exit %d\n%s", code, errOut)
	}
}

func TestServeKeepsSingleDashFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, []string{"-demo", "-addr", "127.0.0.1:0", "-database=" + filepath.Join(dir, "toolplane.db"), "-rate-limit", "0"}, &out, &errOut)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errOut.String())
		}
	}()
	for deadline := time.Now().Add(serveStartBound); !strings.Contains(out.String(), "toolplane serving"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", out.String(), errOut.String())
		}
	}
	if !strings.Contains(out.String(), filepath.Join(dir, "toolplane.db")) {
		t.Fatalf("-database was not read: %s", out.String())
	}
}

// seedUncertain stores an uncertain action on the server's database, as a
// write whose worker was lost after dispatch leaves one.
func seedUncertain(t *testing.T, r running, tool, key string) {
	t.Helper()
	ctx := context.Background()
	b, err := backend.Open(ctx, r.database)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now()
	ok, err := b.Store.InsertClaim(ctx, &toolplane.Claim{OrganizationID: DefaultOrganization, Tool: tool, Key: key, RequestHash: "sha256:cli",
		Status: toolplane.ClaimUncertain, Owner: "lost-node", Dispatched: true, Attempts: 1, RunID: "run-cli", Arguments: []byte(`{"ticket_id":"t-1","text":"hi"}`),
		Reason: "the worker was lost after dispatch", Version: 1, CreatedAt: now, UpdatedAt: now})
	if err != nil || !ok {
		t.Fatalf("seed an uncertain action: %v %v", ok, err)
	}
}

// api answers GET path as key, raw.
func (r running) api(t *testing.T, key, path string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", r.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

func TestOperationsThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	// The agent asks for a refund: it waits for a person.
	req, _ := http.NewRequest("POST", r.base+"/v1/tools/demo.refund_order/invoke",
		strings.NewReader(`{"arguments":{"order_id":"o-501","amount_cents":1000,"reason":"cracked screen"},"run_id":"cli-run-1"}`))
	req.Header.Set("Authorization", "Bearer "+r.agent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var pending struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.api(t, r.admin, "/v1/approvals"), &pending); err != nil || len(pending.Items) != 1 {
		t.Fatalf("pending approvals: %v %v", pending, err)
	}
	approvalID := pending.Items[0].ID
	// The refund's approval_required event is stored by the background
	// audit writer after the call answered: the steps below read it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var filed struct {
			Items []json.RawMessage `json:"items"`
		}
		if json.Unmarshal(r.api(t, r.admin, "/v1/audit/events?tool=demo.refund_order&outcome=approval_required"), &filed) == nil && len(filed.Items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refund's approval_required audit event was never stored")
		}
	}
	seedUncertain(t, r, "demo.add_note", "cli-uncertain-1")
	auditor := mintPerson(t, r, "ada", "auditor")

	srv := []string{"--server", r.base}
	steps := []struct {
		name     string
		key      string
		args     []string
		wantCode int
		want     string // a regexp, in stdout, or in stderr when the command fails
	}{
		// approvals
		{"pending approvals, as a table", r.admin, []string{"approvals", "list"}, 0, `(?m)^ID\s+TOOL\s+STATUS.*\n` + approvalID + `\s+demo.refund_order\s+pending`},
		{"flags after the arguments", r.admin, []string{"approvals", "show", approvalID, "-o", "json"}, 0, `"tool": "demo.refund_order"`},
		{"the agent may not answer", r.agent, []string{"approvals", "approve", approvalID}, 1, `denied: answering approvals needs a person's key`},
		{"an auditor may not either", auditor, []string{"approvals", "approve", approvalID}, 1, `denied`},
		{"the admin approves", r.admin, []string{"approvals", "approve", approvalID, "--reason", "ok by phone"}, 0, `status:\s+approved`},
		{"not twice", r.admin, []string{"approvals", "reject", approvalID}, 1, `conflict`},
		{"show finds it approved", r.admin, []string{"approvals", "show", approvalID}, 0, `status:\s+approved`},
		{"show an unknown approval", r.admin, []string{"approvals", "show", "apr_nope"}, 1, `not_found`},
		{"the agent may not read one", r.agent, []string{"approvals", "show", approvalID}, 1, `denied: reading approvals needs the approver or auditor role`},
		// keys
		{"create a person's key", r.admin, []string{"keys", "create", "grace", "--kind", "person", "--role", "approver", "--label", "cli test", "-o", "json"}, 0, `"subject": "grace"`},
		{"an agent cannot create keys", r.agent, []string{"keys", "create", "eve", "--kind", "person"}, 1, `denied: creating keys needs the platform_admin role`},
		{"list the keys", auditor, []string{"keys", "list"}, 0, `(?m)^ID\s+KIND\s+SUBJECT.*\n(.*\n)*tpk_\S+\s+person\s+grace\s+approver\s+-\s+cli test`},
		{"revoke an unknown key", r.admin, []string{"keys", "revoke", "tpk_nope"}, 1, `not_found: no key tpk_nope`},
		// audit
		{"the audit trail", r.admin, []string{"audit", "list", "--tool", "demo.refund_order"}, 0, `approval_required`},
		{"the agent may not read it", r.agent, []string{"audit", "list"}, 1, `denied: the audit trail needs the auditor role`},
		{"show an unknown event", auditor, []string{"audit", "show", "aud_nope"}, 1, `not_found`},
		// uncertain
		{"the uncertain action", auditor, []string{"uncertain", "list"}, 0, `demo.add_note\s+cli-uncertain-1\s+run-cli`},
		{"an auditor may not reconcile", auditor, []string{"uncertain", "reconcile", "demo.add_note", "cli-uncertain-1", "--failure", "not_found:no such ticket"}, 1, `denied`},
		{"the admin reconciles it", r.admin, []string{"uncertain", "reconcile", "demo.add_note", "cli-uncertain-1", "--failure", "not_found:no such ticket", "-o", "json"}, 0, `"code": "not_found"`},
		{"it is no longer uncertain", r.admin, []string{"uncertain", "list", "-o", "json"}, 0, `"items": \[\]`},
		{"reconcile it again", r.admin, []string{"uncertain", "reconcile", "demo.add_note", "cli-uncertain-1", "--unconfirmed", "still checking"}, 1, `conflict|not_found`},
	}
	for _, st := range steps {
		args := append(append([]string{}, st.args...), append(srv, "--key", st.key)...)
		code, out, errOut := runIn(nil, args...)
		text := out
		if st.wantCode != 0 {
			text = errOut
		}
		if code != st.wantCode || !regexp.MustCompile(st.want).MatchString(text) {
			t.Errorf("%s: exit %d, want %d and %s\nstdout: %s\nstderr: %s", st.name, code, st.wantCode, st.want, out, errOut)
		}
	}

	// audit show finds an event audit list printed.
	var evs struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.api(t, r.admin, "/v1/audit/events?tool=demo.refund_order"), &evs); err != nil || len(evs.Items) == 0 {
		t.Fatalf("audit events: %v", err)
	}
	code, out, errOut := runIn(nil, "audit", "show", evs.Items[0].ID, "--server", r.base, "--key", auditor)
	if code != 0 || !regexp.MustCompile(`id:\s+`+evs.Items[0].ID).MatchString(out) {
		t.Errorf("audit show: exit %d\n%s\n%s", code, out, errOut)
	}
	// A created key works, and revoked it does not.
	code, out, _ = runIn(nil, "keys", "create", "ops-bot", "--kind", "person", "--role", "auditor", "-o", "json", "--server", r.base, "--key", r.admin)
	var created struct {
		Key        string `json:"key"`
		Credential struct {
			ID string `json:"id"`
		} `json:"credential"`
	}
	if err := json.Unmarshal([]byte(out), &created); code != 0 || err != nil || created.Key == "" {
		t.Fatalf("keys create: %d %s %v", code, out, err)
	}
	if code, _, errOut := runIn(nil, "keys", "list", "--server", r.base, "--key", created.Key); code != 0 {
		t.Fatalf("the created key: %d %s", code, errOut)
	}
	if code, out, errOut := runIn(nil, "keys", "revoke", created.Credential.ID, "--server", r.base, "--key", r.admin); code != 0 || !strings.Contains(out, "revoked_at") {
		t.Fatalf("keys revoke: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(nil, "keys", "list", "--server", r.base, "--key", created.Key); code != 1 || !strings.Contains(errOut, "unauthenticated") || !strings.Contains(errOut, "key from --key") {
		t.Fatalf("the revoked key: %d %s", code, errOut)
	}
}

func TestOutputFormats(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	raw := r.api(t, r.admin, "/v1/grants?agent_id=demo-agent")
	var want any
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	base := []string{"grants", "list", "demo-agent", "--server", r.base, "--key", r.admin}
	decoders := []struct {
		format string
		decode func([]byte, any) error
	}{
		{"json", json.Unmarshal},
		{"yaml", yaml.Unmarshal},
	}
	for _, d := range decoders {
		code, out, errOut := runIn(nil, append(base, "-o", d.format)...)
		var got any
		if err := d.decode([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("-o %s: %d %v %s", d.format, code, err, errOut)
		}
		if !reflect.DeepEqual(normalize(t, got), normalize(t, want)) {
			t.Errorf("-o %s is not the API's answer:\n%s\nwant %s", d.format, out, raw)
		}
	}
	// The single-dash form the flag package accepted still works.
	code, out, errOut := runIn(nil, "grants", "list", "demo-agent", "-server", r.base, "-key", r.admin, "-output=json")
	if code != 0 || !strings.Contains(out, `"grt_first_demo"`) {
		t.Errorf("single-dash flags: %d %s %s", code, out, errOut)
	}
	code, out, _ = runIn(nil, base...)
	if code != 0 || !regexp.MustCompile(`(?m)^ID\s+AGENT_ID\s+USER_ID\s+GROUP\s+PATTERN.*\ngrt_first_demo\s+demo-agent\s+-\s+-\s+demo\.\*`).MatchString(out) {
		t.Errorf("table: %d\n%s", code, out)
	}
	// -o field=PATH: one value a line, for a shell to capture.
	fields := []struct {
		name     string
		args     []string
		wantCode int
		want     string // a regexp over the whole of stdout, or stderr when it fails
	}{
		{"a list's items", []string{"grants", "list", "demo-agent", "-o", "field=id"}, 0, `^grt_first_demo\n$`},
		{"a dotted path", []string{"keys", "create", "kim", "--kind", "person", "-o", "field=credential.subject"}, 0, `^kim\n$`},
		{"an object's field", []string{"keys", "create", "lee", "--kind", "person", "-o", "field=key"}, 0, `^tpk_\S+\n$`},
		{"a field the answer lacks", []string{"keys", "create", "max", "--kind", "person", "-o", "field=nope"}, 1, `no field "nope"`},
		{"no path", []string{"grants", "list", "demo-agent", "-o", "field="}, 2, `want table, json, yaml or field=PATH`},
	}
	for _, f := range fields {
		code, out, errOut := runIn(nil, append(f.args, "--server", r.base, "--key", r.admin)...)
		text := out
		if f.wantCode != 0 {
			text = errOut
		}
		if code != f.wantCode || !regexp.MustCompile(f.want).MatchString(text) {
			t.Errorf("-o field, %s: exit %d, want %d and %s\nstdout: %q\nstderr: %s", f.name, code, f.wantCode, f.want, out, errOut)
		}
	}
	code, out, _ = runIn(nil, "grants", "explain", "demo-agent", "--server", r.base, "--key", r.admin)
	if code != 0 || !regexp.MustCompile(`(?m)^TOOL\s+VERSION.*\ndemo\.\S+\s+1\.0\.0`).MatchString(out) {
		t.Errorf("explain table: %d\n%s", code, out)
	}
}

// normalize answers v as JSON decodes it, so YAML's and JSON's numbers and
// maps compare.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoginContextsAndPrecedence(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	dead := freePort(t)
	cfg := t.TempDir()
	env := func(kv ...string) map[string]string {
		m := map[string]string{"XDG_CONFIG_HOME": cfg}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	code, out, errOut := runIn(env(), "login", "--server", r.base, "--key", r.admin)
	if code != 0 || !strings.Contains(out, `context "default"`) {
		t.Fatalf("login: %d %s %s", code, out, errOut)
	}
	file := filepath.Join(cfg, "toolplane", "config.yaml")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v", fi, err)
	}
	if code, out, errOut := runIn(env(), "login", "--server", dead, "--key", "tpk_other", "--context", "elsewhere", "--no-verify"); code != 0 {
		t.Fatalf("login elsewhere: %d %s %s", code, out, errOut)
	}
	cases := []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		want     string // in stderr when the command fails
	}{
		{"the current context is elsewhere", env(), nil, 1, "cannot reach toolplane at " + dead + ` (from context "elsewhere")`},
		{"--context picks another", env(), []string{"--context", "default"}, 0, ""},
		{"the environment beats the context", env("TOOLPLANE_SERVER", r.base, "TOOLPLANE_KEY", r.admin), nil, 0, ""},
		{"a wrong key in the environment is named", env("TOOLPLANE_SERVER", r.base, "TOOLPLANE_KEY", "tpk_wrong"), nil, 1, "did not accept the key from $TOOLPLANE_KEY"},
		{"a flag beats the environment", env("TOOLPLANE_SERVER", dead, "TOOLPLANE_KEY", "tpk_wrong"), []string{"--server", r.base, "--key", r.admin}, 0, ""},
		{"an empty --key is refused, not read as unset", env("TOOLPLANE_SERVER", r.base, "TOOLPLANE_KEY", r.admin), []string{"--key", ""}, 2, "--key is empty"},
		{"an empty --key= too", env("TOOLPLANE_SERVER", r.base, "TOOLPLANE_KEY", r.admin), []string{"--key="}, 2, "--key is empty"},
		{"an empty variable is unset", env("TOOLPLANE_SERVER", "", "TOOLPLANE_KEY", ""), []string{"--context", "default"}, 0, ""},
		{"an unknown context", env(), []string{"--context", "nowhere"}, 2, `no context "nowhere"`},
		// A context's key goes only to that context's server.
		{"--context ignores the environment's server", env("TOOLPLANE_SERVER", dead), []string{"--context", "default"}, 0, ""},
		{"the environment's server, the current context's key withheld", env("TOOLPLANE_SERVER", r.base), nil, 2, "no API key for " + r.base},
		{"--server elsewhere, the context's key withheld", env(), []string{"--context", "default", "--server", dead}, 2, "no API key for " + dead},
		{"--server naming the context's own server keeps its key", env(), []string{"--context", "default", "--server", r.base + "/"}, 0, ""},
	}
	for _, c := range cases {
		code, out, errOut := runIn(c.env, append([]string{"keys", "list"}, c.args...)...)
		if code != c.wantCode || (c.want != "" && !strings.Contains(errOut, c.want)) || (code == 0 && !strings.Contains(out, "TOOLPLANE_ADMIN_KEY")) {
			t.Errorf("%s: exit %d, want %d and %q\nstdout: %s\nstderr: %s", c.name, code, c.wantCode, c.want, out, errOut)
		}
	}
	// use-context switches, and get-contexts shows which is current
	// without the secrets.
	if code, _, errOut := runIn(env(), "config", "use-context", "default"); code != 0 {
		t.Fatalf("use-context: %s", errOut)
	}
	if code, out, errOut := runIn(env(), "keys", "list"); code != 0 || !strings.Contains(out, "TOOLPLANE_ADMIN_KEY") {
		t.Fatalf("after use-context: %d %s %s", code, out, errOut)
	}
	code, out, _ = runIn(env(), "config", "get-contexts")
	// Split by position, as the key's own parser does: the secret may hold
	// underscores, and what follows the last one can be a single letter
	// that the listing holds anyway.
	_, secret, err := apikey.Parse(r.admin)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || !regexp.MustCompile(`(?m)^\*\s+default\s+`+regexp.QuoteMeta(r.base)).MatchString(out) || !strings.Contains(out, "elsewhere") || strings.Contains(out, secret) {
		t.Fatalf("get-contexts: %d\n%s", code, out)
	}
	if code, _, errOut := runIn(env(), "config", "use-context", "nowhere"); code != 1 || !strings.Contains(errOut, `no context "nowhere"`) {
		t.Fatalf("use-context nowhere: %d %s", code, errOut)
	}
	if code, _, errOut := runIn(env(), "login", "--key", ""); code != 2 || !strings.Contains(errOut, "--key is required") {
		t.Fatalf("login with an empty key: %d %s", code, errOut)
	}
}

func TestOfflineCommandsTakeFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "toolplane.db")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lint", "../../examples/tools/refund_order.yaml", "--args", `{"order_id":" ord_9f8a7c2e1b3d ","amount_cents":1500,"reason":"Defective"}`}, `"rule":"trim"`},
		{[]string{"lint", "../../examples/tools/send_email.yaml", "-handler", "email.send+preview", "--fact", "recipient_is_new"}, `"name": "email_send"`},
		{[]string{"migrate", "up", "--database", db}, "applied "},
		{[]string{"migrate", "status", "-database", db, "-o", "json"}, `"applied": true`},
		{[]string{"migrate", "status", "-o", "yaml", "--database", db}, "applied: true"},
	}
	for _, c := range cases {
		code, out, errOut := runIn(nil, c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %q in\n%s\n%s", c.args, code, c.want, out, errOut)
		}
	}
}

// A key's tool listing is set when it is minted and changed later, each
// change audited; what is not a listing is refused before it is sent, or
// by the server at its field.
func TestKeysListing(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	srv := []string{"--server", r.base, "--key", r.admin}
	run := func(args ...string) (int, string, string) { return runIn(nil, append(args, srv...)...) }
	code, out, errOut := run("keys", "create", "bot-listed", "--kind", "agent", "--listing", "hybrid", "--listing-top", "5", "-o", "json")
	var created struct {
		Credential struct {
			ID         string `json:"id"`
			Listing    string `json:"listing"`
			ListingTop int    `json:"listing_top"`
		} `json:"credential"`
	}
	if err := json.Unmarshal([]byte(out), &created); code != 0 || err != nil || created.Credential.Listing != "hybrid" || created.Credential.ListingTop != 5 {
		t.Fatalf("keys create --listing hybrid --listing-top 5: %d %s %s", code, out, errOut)
	}
	id := created.Credential.ID
	steps := []struct {
		name     string
		args     []string
		wantCode int
		want     string // a regexp, in stdout, or in stderr when the command fails
	}{
		{"listed with the key", []string{"keys", "list"}, 0, `(?m)^` + id + `\s+agent\s+bot-listed\s.*hybrid\s*$`},
		{"changed to meta", []string{"keys", "set-listing", id, "--listing", "meta", "-o", "json"}, 0, `"listing": "meta"`},
		{"the change is listed", []string{"keys", "list"}, 0, `(?m)^` + id + `\s+agent\s+bot-listed\s.*meta\s*$`},
		{"no such listing", []string{"keys", "set-listing", id, "--listing", "everything"}, 2, `--listing: want full, meta or hybrid`},
		{"a number without hybrid", []string{"keys", "set-listing", id, "--listing", "meta", "--listing-top", "3"}, 2, `--listing-top`},
		{"a number past the bound", []string{"keys", "set-listing", id, "--listing", "hybrid", "--listing-top", "51"}, 1, `listing_top must be between 1 and 50`},
		{"another key", []string{"keys", "set-listing", "tpk_nope", "--listing", "meta"}, 1, `not_found: no key tpk_nope`},
		{"a person's key lists no tools", []string{"keys", "create", "pat", "--kind", "person", "--listing", "meta"}, 1, `a person's key calls no tools`},
	}
	for _, st := range steps {
		code, out, errOut := run(st.args...)
		text := out
		if st.wantCode != 0 {
			text = errOut
		}
		if code != st.wantCode || !regexp.MustCompile(st.want).MatchString(text) {
			t.Errorf("%s: exit %d, want %d and %s\nstdout: %s\nstderr: %s", st.name, code, st.wantCode, st.want, out, errOut)
		}
	}
	// The agent may not change its own listing.
	if code, _, errOut := runIn(nil, "keys", "set-listing", id, "--listing", "full", "--server", r.base, "--key", r.agent); code != 1 || !strings.Contains(errOut, "denied") {
		t.Errorf("the agent changing a listing: exit %d %s", code, errOut)
	}
	// The change that took effect is in the trail, saying what it set.
	var evs struct {
		Items []struct {
			Kind    string `json:"kind"`
			Subject string `json:"subject"`
			Outcome string `json:"outcome"`
			Reason  string `json:"reason"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.api(t, r.admin, "/v1/audit/events?kind=key&outcome=listing_changed"), &evs); err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, e := range evs.Items {
		if e.Subject == id {
			changes = append(changes, e.Reason)
		}
	}
	if len(changes) != 1 || !strings.Contains(changes[0], "tools listed: meta") {
		t.Errorf("listing changes audited for %s: %q; want the one change to meta", id, changes)
	}
}
