package egress_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// seen is what the echo endpoint reports of the request it received.
type seen struct {
	Host          string
	Authorization string
	APIKey        string
	Cookie        string
}

// redirectServer serves every test name on one loopback port:
//
//	/echo            the request's host and secret headers, as JSON
//	/redirect?to=U   302 to U
//	/hops?n=N        302 to /hops?n=N-1 on the same host, 200 at 0
func redirectServer(t *testing.T) (port string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		json.NewEncoder(w).Encode(seen{
			Host:          host,
			Authorization: r.Header.Get("Authorization"),
			APIKey:        r.Header.Get("X-Api-Key"),
			Cookie:        r.Header.Get("Cookie"),
		})
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/hops", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if n > 0 {
			http.Redirect(w, r, "/hops?n="+strconv.Itoa(n-1), http.StatusFound)
			return
		}
		w.Write([]byte("done"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// redirectPolicy lists a.test, b.test and *.a.test, which resolve to the
// server's 127.0.0.1 (the one address allowed), and evil.test and
// meta.test, which resolve to a loopback address not allowed and to the
// metadata address. unlisted.test resolves to the server but is not
// listed.
func redirectPolicy(t *testing.T) *egress.Policy {
	t.Helper()
	res := newResolver(map[string][]string{
		"a.test":        {"127.0.0.1"},
		"b.test":        {"127.0.0.1"},
		"sub.a.test":    {"127.0.0.1"},
		"unlisted.test": {"127.0.0.1"},
		"evil.test":     {"127.0.0.2"},
		"meta.test":     {"169.254.169.254"},
	})
	p, err := egress.Compile(toolplane.EgressRules{
		Hosts:      []string{"a.test", "b.test", "*.a.test", "evil.test", "meta.test", "169.254.169.254", "127.0.0.2"},
		AllowCIDRs: []string{"127.0.0.1/32"},
	}, egress.WithResolver(res), egress.WithSecretHeaders("X-API-Key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.CloseIdleConnections)
	return p
}

// get sends GET u with the secret headers a connection would present.
func get(c *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer sk-live-123")
	req.Header.Set("X-API-Key", "key-456")
	req.Header.Set("Cookie", "session=789")
	return c.Do(req)
}

func readSeen(t *testing.T, resp *http.Response) seen {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var s seen
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestClientRedirects(t *testing.T) {
	t.Parallel()
	port, otherPort := redirectServer(t), redirectServer(t)
	p := redirectPolicy(t)
	client := p.Client(10 * time.Second)
	at := func(host, path string) string { return "http://" + net.JoinHostPort(host, port) + path }
	via := func(to string) string { return at("a.test", "/redirect?to="+url.QueryEscape(to)) }

	refusals := []struct {
		name string
		url  string
		rule string
		addr string
	}{
		{"to the metadata address", via("http://169.254.169.254/latest/meta-data/"), "cloud metadata address 169.254.169.254", "169.254.169.254"},
		{"to a name resolving to the metadata address", via("http://meta.test/computeMetadata/v1/"), "cloud metadata address 169.254.169.254", "169.254.169.254"},
		{"to a loopback address not allowed", via(at("127.0.0.2", "/echo")), "loopback address 127.0.0.2", "127.0.0.2"},
		{"to a name resolving to a loopback address not allowed", via(at("evil.test", "/echo")), "loopback address 127.0.0.2", "127.0.0.2"},
		{"to the server's own address, not listed", via(at("127.0.0.1", "/echo")), "not on the connection's host list", ""},
		{"to a host not listed", via(at("unlisted.test", "/echo")), "not on the connection's host list", ""},
		{"to another scheme", via("ftp://a.test/file"), `scheme "ftp"`, ""},
		{"to a file", via("file:///etc/passwd"), `scheme "file"`, ""},
		{"past five redirects", at("a.test", "/hops?n=6"), "more than 5 redirects", ""},
		{"the first request, to a host not listed", at("unlisted.test", "/echo"), "not on the connection's host list", ""},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := get(client, tt.url)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("status %d; want refused", resp.StatusCode)
			}
			var urlErr *url.Error
			var refused *egress.RefusedError
			if !errors.As(err, &urlErr) || !errors.As(err, &refused) || !errors.Is(err, toolplane.ErrForbidden) {
				t.Fatalf("error %v (%T); want a *RefusedError inside a *url.Error", err, err)
			}
			if !strings.Contains(refused.Rule, tt.rule) || refused.Addr != tt.addr || refused.Host == "" {
				t.Errorf("refusal %+v; want rule %q at %q", refused, tt.rule, tt.addr)
			}
			if strings.Contains(err.Error(), "sk-live-123") || strings.Contains(err.Error(), "key-456") {
				t.Errorf("the refusal quotes a secret: %v", err)
			}
		})
	}

	allowed := []struct {
		name    string
		url     string
		host    string
		secrets bool // whether the secret headers reach the end
	}{
		{"a direct call", at("a.test", "/echo"), "a.test", true},
		{"the host in upper case", at("A.TEST", "/echo"), "a.test", true},
		{"a redirect on the same host", via(at("a.test", "/echo")), "a.test", true},
		{"a redirect to another listed host", via(at("b.test", "/echo")), "b.test", false},
		{"a redirect to a subdomain", via(at("sub.a.test", "/echo")), "sub.a.test", false},
		{"a redirect away and back", via(at("b.test", "/redirect?to="+url.QueryEscape(at("a.test", "/echo")))), "a.test", false},
		// Another port of the same host may be another party's service.
		{"a redirect to another port of the same host", via("http://" + net.JoinHostPort("a.test", otherPort) + "/echo"), "a.test", false},
	}
	for _, tt := range allowed {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := get(client, tt.url)
			if err != nil {
				t.Fatal(err)
			}
			s := readSeen(t, resp)
			if !strings.EqualFold(s.Host, tt.host) {
				t.Errorf("reached %s; want %s", s.Host, tt.host)
			}
			want := seen{Host: s.Host}
			if tt.secrets {
				want = seen{Host: s.Host, Authorization: "Bearer sk-live-123", APIKey: "key-456", Cookie: "session=789"}
			}
			if s != want {
				t.Errorf("the end saw %+v; want %+v", s, want)
			}
		})
	}

	t.Run("five redirects", func(t *testing.T) {
		t.Parallel()
		resp, err := get(client, at("a.test", "/hops?n=5"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
}

// TestClientDropsSecretsNetHTTPKeeps sends each redirect twice, through
// net/http alone over the policy's transport and through the policy's
// client, and wants the secrets net/http forwards (Authorization and
// Cookie to a subdomain, a header of the connection's own naming to any
// host) to reach the end only without the policy's client. The net/http
// half is the premise the policy's redirect check exists for: when it
// fails, net/http changed and the check's comment should say so.
func TestClientDropsSecretsNetHTTPKeeps(t *testing.T) {
	t.Parallel()
	port := redirectServer(t)
	p := redirectPolicy(t)
	plain := &http.Client{Transport: p.Transport()}
	client := p.Client(10 * time.Second)
	at := func(host string) string {
		to := "http://" + net.JoinHostPort(host, port) + "/echo"
		return "http://" + net.JoinHostPort("a.test", port) + "/redirect?to=" + url.QueryEscape(to)
	}
	all := seen{Authorization: "Bearer sk-live-123", APIKey: "key-456", Cookie: "session=789"}
	for _, tt := range []struct {
		host   string
		plain  seen // what net/http alone forwards
		policy seen // what the policy's client forwards
	}{
		{"a.test", all, all},
		{"b.test", seen{APIKey: "key-456"}, seen{}},
		{"sub.a.test", all, seen{}},
	} {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			for _, c := range []struct {
				name   string
				client *http.Client
				want   seen
			}{
				{"net/http alone", plain, tt.plain},
				{"the policy's client", client, tt.policy},
			} {
				resp, err := get(c.client, at(tt.host))
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				want := c.want
				want.Host = tt.host
				if s := readSeen(t, resp); s != want {
					t.Errorf("%s, redirected to %s: the end saw %+v; want %+v", c.name, tt.host, s, want)
				}
			}
		})
	}
}

func TestClientTransport(t *testing.T) {
	t.Parallel()
	p := redirectPolicy(t)
	q := redirectPolicy(t)
	c := p.Client(7 * time.Second)
	tr, ok := c.Transport.(*http.Transport)
	switch {
	case !ok || tr != p.Transport():
		t.Fatalf("client transport %T; want the policy's own", c.Transport)
	case tr.Proxy != nil:
		t.Error("the transport consults a proxy")
	case tr == q.Transport():
		t.Error("two policies share a transport, and its idle connections")
	case c.Timeout != 7*time.Second:
		t.Errorf("timeout %v", c.Timeout)
	case c.CheckRedirect == nil:
		t.Error("redirects are not checked")
	}
	if p.Client(0).Timeout != 0 {
		t.Error("a zero timeout is not kept")
	}
}

// TestTransportKeepsConnectionsOfConcurrentCalls: calls made at once to
// one host, wave after wave, reuse the connections of the first wave
// instead of dialing new ones.
func TestTransportKeepsConnectionsOfConcurrentCalls(t *testing.T) {
	t.Parallel()
	const calls = 32
	var (
		mu     sync.Mutex
		opened int
		wave   sync.WaitGroup
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every call of a wave is in flight at once: none answers
		// before all have arrived, so none can reuse another's
		// connection within the wave.
		wave.Done()
		wave.Wait()
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	p, err := egress.Compile(toolplane.EgressRules{Hosts: []string{"127.0.0.1"}, AllowCIDRs: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	hc := p.Client(10 * time.Second)
	defer p.CloseIdleConnections()
	for w := range 3 {
		wave.Add(calls)
		var done sync.WaitGroup
		errs := make(chan error, calls)
		for range calls {
			done.Go(func() {
				resp, err := hc.Get(srv.URL)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		done.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("wave %d: %v", w+1, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if opened != calls {
		t.Errorf("three waves of %d calls opened %d connections, want %d", calls, opened, calls)
	}
}
