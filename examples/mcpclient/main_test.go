package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/server"
	"github.com/toolplane/toolplane/internal/syncbuf"
)

func TestEndpointFollowsTOOLPLANE_SERVER(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ server, want string }{
		{"", "http://localhost:8080/mcp"},
		{"http://127.0.0.1:9090", "http://127.0.0.1:9090/mcp"},
		{"https://toolplane.example/", "https://toolplane.example/mcp"},
	} {
		if got := endpoint(tc.server); got != tc.want {
			t.Errorf("endpoint(%q) = %q, want %q", tc.server, got, tc.want)
		}
	}
}

// A call that needs approval is waited for: the client names the
// approval, asks again until a person answers, and prints the approved
// call's result; with -wait 0 it files the approval and returns. Against
// a real demo server, with the approval answered over its REST API.
func TestAnApprovalIsWaitedForUntilAPersonAnswers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := server.New(context.Background(), server.Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), Demo: true, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-ran })
	base := "http://" + s.Addr()
	creds := map[string]string{}
	b, err := os.ReadFile(filepath.Join(dir, "credentials.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		creds[k] = v
	}
	agent, admin := creds["TOOLPLANE_DEMO_AGENT_KEY"], creds["TOOLPLANE_ADMIN_KEY"]
	pollEvery = 50 * time.Millisecond

	var quick bytes.Buffer
	if err := run(t.Context(), &quick, base+"/mcp", agent, "demo_refund_order", `{"order_id":"o-501","amount_cents":4990,"reason":"cracked"}`, 0); err != nil ||
		!strings.Contains(quick.String(), "not waiting (-wait 0)") {
		t.Fatalf("-wait 0: %v\n%s", err, quick.String())
	}

	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), &out, base+"/mcp", agent, "demo_refund_order", `{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"}`, time.Minute)
	}()
	id := ""
	for deadline := time.Now().Add(20 * time.Second); id == ""; time.Sleep(20 * time.Millisecond) {
		if m := regexp.MustCompile(`waiting up to 1m0s for a person to answer approval (apr_\w+)`).FindStringSubmatch(out.String()); m != nil {
			id = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client never said it waits:\n%s", out.String())
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the client returned (%v) before the approval was answered:\n%s", err, out.String())
	case <-time.After(300 * time.Millisecond):
	}
	req, _ := http.NewRequest("POST", base+"/v1/approvals/"+id+"/approve", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("approve: %v %v", resp, err)
	}
	resp.Body.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the client did not return once approved:\n%s", out.String())
	}
	text := out.String()
	if last := text[strings.LastIndex(text, "demo_refund_order (isError="):]; !strings.HasPrefix(last, "demo_refund_order (isError=false)") || !strings.Contains(last, "o-502") {
		t.Errorf("the approved call's result is not printed:\n%s", text)
	}
}
