package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// running is a server started by serve, with its first-start keys.
type running struct {
	base, admin, agent string
	// database is the server's SQLite file.
	database string
	// stderr is what the server writes to its standard error (its log).
	stderr *syncbuf.Buffer
}

// startServe runs serve --demo with flags on a loopback port, on a fresh
// database, until the test ends, and answers where it listens and the
// first start's keys.
func startServe(t *testing.T, flags ...string) running {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncbuf.Buffer
	errOut := &syncbuf.Buffer{}
	done := make(chan int, 1)
	args := append([]string{"--demo", "--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "toolplane.db")}, flags...)
	go func() { done <- serve(ctx, args, &out, errOut) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			t.Error("serve did not stop")
		}
	})
	addrRE := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+) `)
	for deadline := time.Now().Add(serveStartBound); ; time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			creds := readCreds(t, filepath.Join(dir, "credentials.env"))
			return running{base: m[1], admin: creds["TOOLPLANE_ADMIN_KEY"], agent: creds["TOOLPLANE_DEMO_AGENT_KEY"],
				database: filepath.Join(dir, "toolplane.db"), stderr: errOut}
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", out.String(), errOut.String())
		}
	}
}

func readCreds(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out
}

// run runs the command line against the server with key, printing the
// API's answers as JSON.
func (r running) run(t *testing.T, key string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append(args, "--server", r.base, "--key", key, "-o", "json"), &out, &errOut)
	return code, out.String(), errOut.String()
}

// call invokes a tool over REST as the demo agent.
func (r running) call(t *testing.T, tool, args string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", r.base+"/v1/tools/"+tool+"/invoke", strings.NewReader(`{"arguments":`+args+`}`))
	req.Header.Set("Authorization", "Bearer "+r.agent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return v
}

func code(v map[string]any) string {
	if e, ok := v["error"].(map[string]any); ok {
		s, _ := e["code"].(string)
		return s
	}
	return "ok"
}

func TestRegistryFlowThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	ex := func(f string) string { return filepath.Join("..", "..", "examples", "registry", f) }

	// The admin mints a key for the support team's tool owner.
	owner := mintPerson(t, r, "sam", "tool_owner:support")

	steps := []struct {
		name     string
		key      string
		args     []string
		wantCode int
		want     string // in stdout, or in stderr when the command fails
	}{
		{"the owner publishes the team's first tool: it goes to review", owner, []string{"tools", "publish", ex("find_tickets-1.0.0.yaml")}, 0, `"state": "in_review"`},
		{"the owner cannot approve", owner, []string{"tools", "approve", "support.find_tickets", "1.0.0"}, 1, "denied"},
		{"a platform_admin approves", r.admin, []string{"tools", "approve", "support.find_tickets", "1.0.0"}, 0, `"state": "active"`},
		{"a compatible minor is self-service", owner, []string{"tools", "publish", ex("find_tickets-1.1.0.yaml")}, 0, `"state": "active"`},
		{"a breaking minor is refused by the gate", owner, []string{"tools", "publish", ex("find_tickets-1.2.0-breaking.yaml")}, 1, "incompatible"},
		{"the same version twice conflicts", owner, []string{"tools", "publish", ex("find_tickets-1.1.0.yaml")}, 1, "conflict"},
		{"the agent is granted the team's tools", r.admin, []string{"grants", "add", "demo-agent", "--pattern", "support.*"}, 0, `"pattern": "support.*"`},
		{"explain names tool, version and grant", r.admin, []string{"grants", "explain", "demo-agent"}, 0, `"version": "1.1.0"`},
		{"explain names the agent's keys and what each narrows calls to", r.admin, []string{"grants", "explain", "demo-agent"}, 0, `"label": "TOOLPLANE_DEMO_AGENT_KEY"`},
		{"deprecate 1.0.0", owner, []string{"tools", "deprecate", "support.find_tickets", "1.0.0", "--sunset", "2027-03-01", "--replacement", "1.1.0"}, 0, `"state": "deprecated"`},
		{"retire 1.0.0", owner, []string{"tools", "retire", "support.find_tickets", "1.0.0"}, 0, `"state": "retired"`},
		{"retire it again", owner, []string{"tools", "retire", "support.find_tickets", "1.0.0"}, 1, "invalid_transition"},
		{"list shows every version", r.admin, []string{"tools", "list", "--name", "support.find_tickets"}, 0, `"version": "1.0.0"`},
	}
	for _, st := range steps {
		code, out, errOut := r.run(t, st.key, st.args...)
		text := out
		if st.wantCode != 0 {
			text = errOut
		}
		if code != st.wantCode || !strings.Contains(text, st.want) {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", st.name, code, out, errOut)
		}
	}
	if v := r.call(t, "support.find_tickets", `{"query":"cracked"}`); code(v) != "ok" {
		t.Fatalf("the agent's call: %v", v)
	}
	if !strings.Contains(r.list(t), `"support.find_tickets"`) {
		t.Fatal("the granted tool is not in the agent's list")
	}
	// A run that froze another contract is refused, not sent a call
	// shaped for it.
	if v := r.call(t, "support.find_tickets", `{"query":"cracked"},"contracts":{"support.find_tickets":"sha256:0000"}`); code(v) != "tool_changed" {
		t.Fatalf("a stale contract: %v", v)
	}
	// The incident deny beats the grant at once.
	if c, _, e := r.run(t, r.admin, "grants", "deny", "*", "support.*", "--reason", "incident 12"); c != 0 {
		t.Fatal(e)
	}
	if v := r.call(t, "support.find_tickets", `{"query":"cracked"}`); code(v) != "denied" {
		t.Fatalf("under the incident deny: %v", v)
	}
	if strings.Contains(r.list(t), `"support.find_tickets"`) {
		t.Fatal("a denied tool is still in the agent's list")
	}
}

// list answers the demo agent's tool list.
func (r running) list(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest("GET", r.base+"/v1/tools", nil)
	req.Header.Set("Authorization", "Bearer "+r.agent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// mintPerson creates a person's key with roles through the API.
func mintPerson(t *testing.T, r running, subject string, roles ...string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"kind": "person", "subject": subject, "roles": roles})
	req, _ := http.NewRequest("POST", r.base+"/v1/keys", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.Key == "" {
		t.Fatalf("mint %s: %v", subject, err)
	}
	return v.Key
}
