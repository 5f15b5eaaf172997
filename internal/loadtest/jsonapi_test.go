package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAPIHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(APIHandler("tok"))
	defer srv.Close()
	tests := []struct {
		name, method, path, auth, body string
		status                         int
	}{
		{"a read", "GET", "/items/it_1", "Bearer tok", "", http.StatusOK},
		{"a write", "POST", "/items/it_1", "Bearer tok", `{"id":"it_1"}`, http.StatusOK},
		{"a write without a body", "POST", "/items/it_1", "Bearer tok", "", http.StatusOK},
		{"a write of no JSON", "POST", "/items/it_1", "Bearer tok", "{", http.StatusBadRequest},
		{"no token", "GET", "/items/it_1", "", "", http.StatusUnauthorized},
		{"a wrong token", "GET", "/items/it_1", "Bearer toc", "", http.StatusUnauthorized},
		{"elsewhere", "GET", "/orders/it_1", "Bearer tok", "", http.StatusNotFound},
	}
	for _, tt := range tests {
		req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d: %s", tt.name, resp.StatusCode, tt.status, b)
			continue
		}
		if tt.status != http.StatusOK {
			continue
		}
		var it item
		if err := json.Unmarshal(b, &it); err != nil || it.ID != "it_1" {
			t.Errorf("%s: answer %s: %v", tt.name, b, err)
		}
		// The answer the benchmarks are stated for: about 300 bytes.
		if len(b) < 270 || len(b) > 330 {
			t.Errorf("%s: the answer is %d bytes, not about 300", tt.name, len(b))
		}
	}
}

// TestRunHTTPGet drives the JSON API directly and through its proxy, as
// the api and apiproxy targets do.
func TestRunHTTPGet(t *testing.T) {
	t.Parallel()
	api, err := StartAPI(t.Context(), "127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	tests := []struct {
		name, url, key, expect string
		wantErrors             bool
	}{
		{"direct", api.URL + itemPath + ItemID, "tok", ItemID, false},
		{"through the proxy", api.ProxyURL + itemPath + ItemID, "tok", ItemID, false},
		{"a wrong key", api.URL + itemPath + ItemID, "toc", ItemID, true},
		{"an unexpected answer", api.ProxyURL + itemPath + "it_2", "tok", ItemID, true},
	}
	for _, tt := range tests {
		res, err := Run(t.Context(), &HTTPGet{Label: "api", URL: tt.url, Key: tt.key, Expect: tt.expect},
			Options{Clients: 2, Warmup: 20 * time.Millisecond, Duration: 150 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if tt.wantErrors != (res.Errors > 0 && res.Calls == 0) || !tt.wantErrors && (res.Calls == 0 || res.Errors > 0) {
			t.Errorf("%s: Run = %+v, first error %v", tt.name, res, res.FirstError)
		}
	}
	if api.PIDs() != nil || api.ProxyPIDs() != nil {
		t.Errorf("an API in this process has process ids %v, %v", api.PIDs(), api.ProxyPIDs())
	}
}

// TestRESTWriteKeys: a write target sends every call with an idempotency
// key no other call of any client had; a read target sends none.
func TestRESTWriteKeys(t *testing.T) {
	t.Parallel()
	for _, write := range []bool{true, false} {
		var (
			mu   sync.Mutex
			keys = map[string]int{}
			bad  atomic.Int64
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Arguments      map[string]any `json:"arguments"`
				IdempotencyKey *string        `json:"idempotency_key"`
			}
			dec := json.NewDecoder(r.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil || body.Arguments["id"] != ItemID {
				bad.Add(1)
				http.Error(w, "bad body", http.StatusBadRequest)
				return
			}
			if body.IdempotencyKey != nil {
				mu.Lock()
				keys[*body.IdempotencyKey]++
				mu.Unlock()
			}
			io.WriteString(w, `{"ok":true,"data":{"id":"`+ItemID+`"}}`)
		}))
		target := &REST{Label: "httpwrite", BaseURL: srv.URL, Key: "k", Tool: HTTPWriteTool,
			Arguments: json.RawMessage(`{"id":"` + ItemID + `"}`), Expect: ItemID, Write: write}
		res, err := Run(t.Context(), target, Options{Clients: 3, Duration: 150 * time.Millisecond})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.Calls == 0 || res.Errors != 0 || bad.Load() != 0 {
			t.Fatalf("write %v: Run = %+v (first error %v), %d bad bodies", write, res, res.FirstError, bad.Load())
		}
		mu.Lock()
		if !write && len(keys) != 0 {
			t.Errorf("a read sent idempotency keys: %v", keys)
		}
		if write {
			if len(keys) < res.Calls {
				t.Errorf("%d calls sent %d distinct keys", res.Calls, len(keys))
			}
			for k, n := range keys {
				if n != 1 {
					t.Errorf("key %q was sent %d times", k, n)
				}
			}
		}
		mu.Unlock()
	}
}

func TestAPIProcess(t *testing.T) {
	t.Setenv(helperEnv, "main")
	api, err := StartAPIProcess(t.Context(), os.Stderr, "tok", os.Args[0], []string{"-test.run=^$", "api"}, []string{"-test.run=^$", "proxy"})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	if len(api.ProxyPIDs()) != 2 || api.ProxyPIDs()[0] == api.PIDs()[0] {
		t.Fatalf("the API and its proxy are not processes of their own: %v, %v", api.PIDs(), api.ProxyPIDs())
	}
	target := &HTTPGet{Label: "apiproxy", URL: api.ProxyURL + itemPath + ItemID, Key: "tok", Expect: ItemID}
	res, err := Run(t.Context(), target, Options{Clients: 1, Duration: 200 * time.Millisecond, Processes: serverProcesses(TargetAPIProxy, 0, nil, nil, api, nil)})
	if err != nil || res.Calls == 0 || res.Errors != 0 {
		t.Fatalf("Run = %+v, %v (first error %v)", res, err, res.FirstError)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && res.CPUPerCall <= 0 {
		t.Errorf("the helpers' CPU per call was not measured: %+v", res)
	}
	proxyCPU, ok1 := res.RoleCPU(RoleGoProxy)
	apiCPU, ok2 := res.RoleCPU(RoleAPI)
	// Each is rounded down to the nanosecond on its own.
	if sum := proxyCPU + apiCPU; !ok1 || !ok2 || sum > res.CPUPerCall || sum < res.CPUPerCall-2 {
		t.Errorf("the proxy's and the API's CPU per call (%v, %v) do not make the total %v", proxyCPU, apiCPU, res.CPUPerCall)
	}
	if serverProcesses(TargetHTTPRead, 0, nil, nil, api, nil) != nil {
		t.Error("the http read tool's CPU is measured without its toolplane")
	}
	if err := api.Close(); err != nil {
		t.Fatal(err)
	}
	// Without its token the API does not start.
	t.Setenv(APITokenEnv, "")
	if err := ServeAPI(t.Context(), "127.0.0.1:0", io.Discard); err == nil {
		t.Error("an API without a token served")
	}
}

// TestMainAPIBaselines runs the command on the JSON API and its proxy.
func TestMainAPIBaselines(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"-upstream", "inprocess", "-target", "api,apiproxy", "-clients", "1,2",
		"-duration", "100ms", "-warmup", "20ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"| api | 1 |", "| apiproxy | 2 |", "apiproxy at 1 client adds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "first error") || strings.Contains(out.String(), "toolplane at") {
		t.Errorf("calls failed, or a toolplane was started:\n%s", out.String())
	}
}

func TestWriteHTTPTools(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "127.0.0.1:1", "http://127.0.0.1:1/api", "ftp://127.0.0.1"} {
		if err := WriteHTTPTools(t.TempDir(), bad); err == nil {
			t.Errorf("WriteHTTPTools(%q) answered no error", bad)
		}
	}
}

// TestHTTPToolsEndToEnd builds and starts toolplane with the http tools
// against the JSON API, and drives the read and the write: what the
// httpread and httpwrite targets do.
func TestHTTPToolsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts toolplane")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var gets, posts atomic.Int64
	api := APIHandler("tok")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		} else {
			gets.Add(1)
		}
		api.ServeHTTP(w, r)
	}))
	defer srv.Close()
	tools := filepath.Join(t.TempDir(), "tools")
	if err := WriteHTTPTools(tools, srv.URL); err != nil {
		t.Fatal(err)
	}
	tp, err := StartToolplane(ctx, ToolplaneOptions{Source: "../..", Args: []string{"--tools", tools}})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Stop()
	args := json.RawMessage(`{"id":"` + ItemID + `"}`)
	// The demo agent is not granted them.
	res, err := Run(ctx, &REST{Label: "httpread", BaseURL: tp.URL, Key: tp.AgentKey, Tool: HTTPReadTool, Arguments: args, Expect: ItemID},
		Options{Clients: 1, Duration: 50 * time.Millisecond})
	if err != nil || res.Calls != 0 || res.Errors == 0 {
		t.Fatalf("a read by the demo agent: Run = %+v, %v", res, err)
	}
	key, err := SetUpHTTPTools(ctx, tp.URL, tp.AdminKey, "tok")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []*REST{
		{Label: "httpread", BaseURL: tp.URL, Key: key, Tool: HTTPReadTool, Arguments: args, Expect: ItemID},
		{Label: "httpwrite", BaseURL: tp.URL, Key: key, Tool: HTTPWriteTool, Arguments: args, Expect: ItemID, Write: true},
	} {
		gets.Store(0)
		posts.Store(0)
		res, err := Run(ctx, target, Options{Clients: 2, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Calls == 0 || res.Errors != 0 {
			t.Fatalf("%s: Run = %+v, first error %v; log: %s", target.Label, res, res.FirstError, logTail(filepath.Join(tp.Dir, "toolplane.log")))
		}
		// Every call reached the API: a write with a fresh key is a new
		// call each time, never a replay from the journal.
		got := gets.Load()
		if target.Write {
			got = posts.Load()
		}
		if got < int64(res.Calls) {
			t.Errorf("%s: %d calls succeeded, the API saw %d", target.Label, res.Calls, got)
		}
	}
}
