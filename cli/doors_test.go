package cli

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/apikey"
)

// serveWith runs serve --demo with extra flags on a loopback port and
// answers its base URL and the first start's admin and demo agent keys.
func serveWith(t *testing.T, flags ...string) (base, admin, agent string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	args := append([]string{"--demo", "--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "data", "toolplane.db")}, flags...)
	go func() { done <- serve(ctx, args, &out, &errOut) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			t.Error("serve did not stop")
		}
	})
	addrRE := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+) `)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
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
	}
	creds, err := os.ReadFile(filepath.Join(dir, "data", "credentials.env"))
	if err != nil {
		t.Fatal(err)
	}
	admin = regexp.MustCompile(`TOOLPLANE_ADMIN_KEY=(\S+)`).FindStringSubmatch(string(creds))[1]
	agent = regexp.MustCompile(`TOOLPLANE_DEMO_AGENT_KEY=(\S+)`).FindStringSubmatch(string(creds))[1]
	return base, admin, agent
}

// from answers a client whose connections leave from the loopback address
// ip: a second caller at a second address on one machine.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func send(t *testing.T, c *http.Client, method, url, key, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// Wrong secrets for the admin's and the demo agent's ids, sent to both
// doors of a served node, leave both keys answering: the flooder is
// refused (401, then 429), the holders are not.
func TestServeWrongSecretsDoNotLockOutTheKeys(t *testing.T) {
	t.Parallel()
	base, admin, agent := serveWith(t, "--rate-limit", "20", "--auth-failure-limit", "5")
	flooder := from("127.0.0.2")
	refused := map[int]int{}
	for i := range 40 {
		for _, key := range []string{admin, agent} {
			id, _, _ := apikey.Parse(key)
			wrong := apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
			if i%2 == 0 {
				refused[send(t, flooder, "GET", base+"/v1/keys", wrong, "")]++
			} else {
				refused[send(t, flooder, "POST", base+"/mcp", wrong, initializeBody)]++
			}
		}
	}
	if refused[http.StatusUnauthorized] != 5 || refused[http.StatusTooManyRequests] != 75 {
		t.Errorf("the flood was answered %v; want 5 refusals of the key, then 429s", refused)
	}
	holder := from("127.0.0.1")
	if status := send(t, holder, "GET", base+"/v1/keys", admin, ""); status != http.StatusOK {
		t.Errorf("the admin key after the flood: %d", status)
	}
	if status := send(t, holder, "POST", base+"/mcp", agent, initializeBody); status != http.StatusOK {
		t.Errorf("the demo agent's key on /mcp after the flood: %d", status)
	}
	if status := send(t, holder, "POST", base+"/v1/tools/demo.search_tickets/invoke", agent, `{"arguments":{"query":"late"}}`); status != http.StatusOK {
		t.Errorf("the demo agent's key on /v1 after the flood: %d", status)
	}
}
