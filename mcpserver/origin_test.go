package mcpserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/mcpserver"
)

func TestProtectHost(t *testing.T) {
	t.Parallel()
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	loopback6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	public := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}
	cases := []struct {
		name    string
		allowed []string
		local   net.Addr // nil: no local address known
		method  string
		host    string
		origin  []string
		want    int
	}{
		// Host on a loopback connection, nothing configured (the default).
		{name: "loopback ip host", local: loopback, host: "127.0.0.1:8080", want: 200},
		{name: "localhost host", local: loopback, host: "localhost:8080", want: 200},
		{name: "localhost host any case, no port", local: loopback, host: "LocalHost", want: 200},
		{name: "localhost with trailing dot", local: loopback, host: "localhost.:8080", want: 200},
		{name: "other loopback ip", local: loopback, host: "127.0.0.2:8080", want: 200},
		{name: "ipv6 loopback host", local: loopback6, host: "[::1]:8080", want: 200},
		{name: "ipv6 loopback host without port", local: loopback6, host: "[::1]", want: 200},
		{name: "rebound name", local: loopback, host: "evil.example.com:8080", want: 403},
		{name: "rebound name without port", local: loopback, host: "evil.example.com", want: 403},
		{name: "rebound name on ipv6 loopback", local: loopback6, host: "evil.example.com", want: 403},
		{name: "name that only starts like localhost", local: loopback, host: "localhost.evil.example.com", want: 403},
		{name: "private address as host", local: loopback, host: "10.0.0.5:8080", want: 403},
		{name: "empty host", local: loopback, host: "", want: 403},
		{name: "rebound name, any method", local: loopback, method: http.MethodGet, host: "evil.example.com", want: 403},
		{name: "rebound name, delete", local: loopback, method: http.MethodDelete, host: "evil.example.com", want: 403},

		// Host on other connections is not judged; allowed names extend loopback's.
		{name: "public connection, any host", local: public, host: "toolplane.example.com", want: 200},
		{name: "public connection, names configured, other host", allowed: []string{"toolplane.example.com"}, local: public, host: "10.0.0.5:8080", want: 200},
		{name: "unknown connection, any host", host: "toolplane.example.com", want: 200},
		{name: "allowed name on loopback (proxy in front)", allowed: []string{"toolplane.example.com"}, local: loopback, host: "toolplane.example.com", want: 200},
		{name: "allowed name, any case and port", allowed: []string{"Toolplane.Example.com"}, local: loopback, host: "TOOLPLANE.example.com:443", want: 200},
		{name: "allowed address", allowed: []string{"10.0.0.5"}, local: loopback, host: "10.0.0.5:8080", want: 200},
		{name: "allowed ipv6 in brackets", allowed: []string{"[fd00::1]"}, local: loopback6, host: "[fd00::1]:8080", want: 200},
		{name: "allowed ipv6 without brackets", allowed: []string{"fd00::1"}, local: loopback6, host: "[fd00::1]:8080", want: 200},
		{name: "names not configured stay refused", allowed: []string{"toolplane.example.com"}, local: loopback, host: "other.example.com", want: 403},
		{name: "loopback names stay allowed", allowed: []string{"toolplane.example.com"}, local: loopback, host: "localhost:8080", want: 200},
		{name: "blank configured names are ignored", allowed: []string{" ", ""}, local: loopback, host: "evil.example.com", want: 403},
		{name: "ipv4-mapped loopback connection", local: &net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 8080}, host: "evil.example.com", want: 403},

		// Origin.
		{name: "loopback origin", local: loopback, host: "127.0.0.1:8080", origin: []string{"http://localhost:6274"}, want: 200},
		{name: "same origin", local: loopback, host: "127.0.0.1:8080", origin: []string{"http://127.0.0.1:8080"}, want: 200},
		{name: "ipv6 loopback origin", local: loopback6, host: "[::1]:8080", origin: []string{"http://[::1]:5173"}, want: 200},
		{name: "rebinding: host and origin both evil", local: loopback, host: "evil.example.com", origin: []string{"http://evil.example.com"}, want: 403},
		{name: "cross-site origin to loopback", local: loopback, host: "127.0.0.1:8080", origin: []string{"http://evil.example.com"}, want: 403},
		{name: "cross-site origin on a get", local: loopback, method: http.MethodGet, host: "127.0.0.1:8080", origin: []string{"https://evil.example.com"}, want: 403},
		{name: "null origin", local: loopback, host: "127.0.0.1:8080", origin: []string{"null"}, want: 403},
		{name: "unparsable origin", local: loopback, host: "127.0.0.1:8080", origin: []string{"http://%zz"}, want: 403},
		{name: "origin without scheme", local: loopback, host: "127.0.0.1:8080", origin: []string{"localhost:6274"}, want: 403},
		{name: "non-web scheme", local: loopback, host: "127.0.0.1:8080", origin: []string{"file://localhost"}, want: 403},
		{name: "one bad origin of two", local: loopback, host: "127.0.0.1:8080", origin: []string{"http://localhost", "http://evil.example.com"}, want: 403},
		{name: "allowed origin", allowed: []string{"console.example.com"}, local: public, host: "console.example.com", origin: []string{"https://console.example.com"}, want: 200},
		{name: "same origin on a public connection", local: public, host: "toolplane.example.com", origin: []string{"https://toolplane.example.com"}, want: 200},
		{name: "same origin, default port in host", local: public, host: "toolplane.example.com:443", origin: []string{"https://toolplane.example.com"}, want: 200},
		{name: "cross-site origin on a public connection", local: public, host: "toolplane.example.com", origin: []string{"https://evil.example.com"}, want: 403},
		{name: "same name, other port is another origin", local: public, host: "toolplane.example.com:8443", origin: []string{"https://toolplane.example.com"}, want: 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reached := false
			h := mcpserver.ProtectHost(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				reached = true
				w.WriteHeader(http.StatusOK)
			}), tc.allowed...)
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			r := httptest.NewRequest(method, "/mcp", strings.NewReader(`{}`))
			r.Host = tc.host
			for _, o := range tc.origin {
				r.Header.Add("Origin", o)
			}
			if tc.local != nil {
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d (%s)", w.Code, tc.want, strings.TrimSpace(w.Body.String()))
			}
			if reached != (tc.want == http.StatusOK) {
				t.Fatalf("next reached: %v with status %d", reached, w.Code)
			}
		})
	}
}

// Over a real loopback listener the server knows the connection's local
// address, so a rebound Host is refused without any configuration.
func TestProtectHostOnALoopbackListener(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(mcpserver.ProtectHost(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	})))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"", "", http.StatusOK}, // the URL's own 127.0.0.1:port
		{"localhost", "http://localhost:6274", http.StatusOK},
		{"evil.example.com", "http://evil.example.com", http.StatusForbidden},
		{"", "http://evil.example.com", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q Origin %q: status %d, want %d", tc.host, tc.origin, resp.StatusCode, tc.want)
		}
	}
}
