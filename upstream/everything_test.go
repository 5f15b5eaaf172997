package upstream_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// everythingEnv names server-everything's entry point (dist/index.js of
// the npm package @modelcontextprotocol/server-everything).
const everythingEnv = "TOOLPLANE_TEST_EVERYTHING"

func TestMain(m *testing.M) {
	if os.Getenv("TOOLPLANE_FILTER_PROXY") == "1" {
		os.Exit(filterProxy())
	}
	if os.Getenv(envServerVar) == "1" {
		os.Exit(envServer())
	}
	os.Exit(m.Run())
}

func TestServerEverythingOverStdio(t *testing.T) {
	entry := os.Getenv(everythingEnv)
	if entry == "" {
		t.Skipf("set %s to the dist/index.js of the npm package @modelcontextprotocol/server-everything (npm install it; .ci/run does) to run the federation test against it", everythingEnv)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	hide := filepath.Join(t.TempDir(), "hide")
	if err := os.WriteFile(hide, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The server runs behind a stdio filter (this test binary again) that
	// can take a tool off the server's list, as a server that drops a tool
	// does, announcing the change the way the server would.
	e := newEnv(t, nil, upstream.Config{Slug: "everything", Command: []string{exe, "-test.run=^$"},
		Env: map[string]string{"TOOLPLANE_FILTER_PROXY": "1", "TOOLPLANE_HIDE_FILE": hide, everythingEnv: "${" + everythingEnv + "}"}})

	for _, name := range []string{"mcp.everything.echo", "mcp.everything.get-sum", "mcp.everything.get-tiny-image"} {
		tool, ok := e.reg.Get("", name)
		if !ok {
			t.Fatalf("%s not ingested; the registry holds %d tools", name, len(e.reg.Tools("")))
		}
		d := tool.Def
		// The server marks echo read-only; its own hints are not taken.
		if d.Effect != toolplane.EffectWrite || !d.Annotations.Destructive || !d.Annotations.RequiresApproval || d.Version != "1.0.0" {
			t.Errorf("%s: effect %s destructive %v requires_approval %v version %s", name, d.Effect, d.Annotations.Destructive, d.Annotations.RequiresApproval, d.Version)
		}
	}

	r := e.approveAndRun(t, "mcp.everything.echo", `{"message":"hello"}`, "run-1")
	if got, _ := json.Marshal(r.Data); !r.OK || !strings.Contains(string(got), "Echo: hello") {
		t.Fatalf("echo through approval: %+v", r)
	}
	r = e.approveAndRun(t, "mcp.everything.get-sum", `{"a":2,"b":3}`, "run-1")
	if got, _ := json.Marshal(r.Data); !r.OK || !strings.Contains(string(got), "5") {
		t.Fatalf("get-sum through approval: %+v", r)
	}

	if err := os.WriteFile(hide, []byte("echo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "echo to leave the registry", func() bool { _, ok := e.reg.Get("", "mcp.everything.echo"); return !ok })
	r, err = e.call(t, "mcp.everything.echo", `{"message":"again"}`, "run-2")
	if err != nil || r.OK || r.Error.Code != toolplane.CodeToolUnavailable {
		t.Fatalf("echo after the server dropped it: %+v %v", r, err)
	}
}

// filterProxy runs server-everything as a child and relays MCP over stdio,
// leaving out of every tools/list answer the tools named in the hide file,
// and announcing tools/list_changed when that file changes.
func filterProxy() int {
	cmd := exec.Command("node", os.Getenv(everythingEnv), "stdio")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return fail(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	var (
		mu    sync.Mutex // guards writes to stdout and lists
		lists = map[string]bool{}
	)
	write := func(line []byte) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.Write(line)
	}
	hidden := func() map[string]bool {
		data, _ := os.ReadFile(os.Getenv("TOOLPLANE_HIDE_FILE"))
		h := map[string]bool{}
		for _, n := range strings.Fields(string(data)) {
			h[n] = true
		}
		return h
	}
	go func() { // client -> server
		r := bufio.NewReader(os.Stdin)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				var msg struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				if json.Unmarshal(line, &msg) == nil && msg.Method == "tools/list" {
					mu.Lock()
					lists[string(msg.ID)] = true
					mu.Unlock()
				}
				in.Write(line)
			}
			if err != nil {
				in.Close()
				return
			}
		}
	}()
	go func() { // announce changes of the hide file
		last, _ := os.ReadFile(os.Getenv("TOOLPLANE_HIDE_FILE"))
		for range time.Tick(50 * time.Millisecond) {
			now, _ := os.ReadFile(os.Getenv("TOOLPLANE_HIDE_FILE"))
			if !bytes.Equal(now, last) {
				last = now
				write([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n"))
			}
		}
	}()
	r := bufio.NewReader(out) // server -> client
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Result *struct {
					Tools []map[string]any `json:"tools"`
				} `json:"result"`
			}
			mu.Lock()
			isList := json.Unmarshal(line, &msg) == nil && msg.Result != nil && lists[string(msg.ID)]
			mu.Unlock()
			if isList {
				var full map[string]any
				_ = json.Unmarshal(line, &full)
				h := hidden()
				kept := []map[string]any{}
				for _, t := range msg.Result.Tools {
					if name, _ := t["name"].(string); !h[name] {
						kept = append(kept, t)
					}
				}
				full["result"].(map[string]any)["tools"] = kept
				line, _ = json.Marshal(full)
				line = append(line, '\n')
			}
			write(line)
		}
		if err != nil {
			break
		}
	}
	_ = cmd.Wait()
	return 0
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "filter proxy:", err)
	return 1
}
