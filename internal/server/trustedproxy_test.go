package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/upstream"
)

// A flood of wrong secrets for a real key's id, from one client, limits
// that client and never the key's holder elsewhere: through a trusted
// reverse proxy each client is counted under the address the proxy names,
// so the holder, behind the same proxy as the flood, still authenticates,
// and the flooding client is refused. Behind a proxy that is not trusted,
// or when a client writes X-Forwarded-For itself, every request counts
// under the connection's address: there the holder shares the flood's
// address, as before.
func TestAFloodOfWrongSecretsLimitsTheFloodersAddress(t *testing.T) {
	t.Parallel()
	const flooder, holder = "203.0.113.9", "198.51.100.4"
	tests := []struct {
		name    string
		proxies []string
		// holderStatus is the holder's answer after the flood; flooder's
		// is the flooding client's next wrong secret.
		holderStatus, flooderStatus int
	}{
		{"through a trusted proxy", []string{"127.0.0.1"}, http.StatusOK, http.StatusTooManyRequests},
		{"through a trusted proxy's network", []string{"127.0.0.0/8", "::1"}, http.StatusOK, http.StatusTooManyRequests},
		{"no proxy trusted: one address for all", nil, http.StatusTooManyRequests, http.StatusTooManyRequests},
		{"headers from a client that is not a trusted proxy", []string{"10.0.0.0/8"}, http.StatusTooManyRequests, http.StatusTooManyRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := start(t, Config{AuthFailureLimit: 30, TrustedProxies: tt.proxies}, upstream.Relax{})
			id, _, err := apikey.Parse(r.agent)
			if err != nil {
				t.Fatal(err)
			}
			wrong := apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
			list := func(key, client string) int {
				t.Helper()
				req, err := http.NewRequest(http.MethodGet, r.base+"/v1/tools", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+key)
				// The test is the proxy: it appends the client's address.
				req.Header.Set("X-Forwarded-For", "192.0.2.200, "+client)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				return res.StatusCode
			}
			// The budgets are per minute of the clock: the flood and what
			// follows run inside one minute.
			if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 20*time.Second {
				time.Sleep(left)
			}
			statuses := map[int]int{}
			for range 620 {
				statuses[list(wrong, flooder)]++
			}
			if statuses[http.StatusUnauthorized] != 30 || statuses[http.StatusTooManyRequests] != 590 {
				t.Errorf("the flood's answers: %v, want 30 401s, then 429s", statuses)
			}
			if got := list(r.agent, holder); got != tt.holderStatus {
				t.Errorf("the holder's request after the flood: %d, want %d", got, tt.holderStatus)
			}
			if got := list(wrong, flooder); got != tt.flooderStatus {
				t.Errorf("the flooding client's next wrong secret: %d, want %d", got, tt.flooderStatus)
			}
		})
	}
}

// A trusted-proxy entry that is neither an address nor a prefix is refused
// before anything is opened, naming the field.
func TestTrustedProxiesAreChecked(t *testing.T) {
	t.Parallel()
	_, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: t.TempDir() + "/toolplane.db", TrustedProxies: []string{"10.0.0.0/8", "proxy.internal"}})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "TrustedProxies" || !errors.Is(err, ratelimit.ErrProxy) || !strings.Contains(err.Error(), "proxy.internal") {
		t.Fatalf("New: %v, want a ConfigError on TrustedProxies naming the entry", err)
	}
}
