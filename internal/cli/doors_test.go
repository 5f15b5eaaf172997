package cli

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/apikey"
)

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
	r := startServe(t, "--rate-limit", "20", "--auth-failure-limit", "5")
	base, admin, agent := r.base, r.admin, r.agent
	flooder := from("127.0.0.2")
	refused := map[int]int{}
	start := time.Now()
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
	// The failure budget is kept in fixed windows of a minute on the wall
	// clock; a flood that runs over the end of one has a fresh budget in
	// the next.
	windows := int(time.Now().Truncate(time.Minute).Sub(start.Truncate(time.Minute))/time.Minute) + 1
	if n := refused[http.StatusUnauthorized]; n < 5 || n > 5*windows || n+refused[http.StatusTooManyRequests] != 80 {
		t.Errorf("the flood, over %d budget window(s), was answered %v; want 5 refusals of the key per window, then 429s", windows, refused)
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
