package httpapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/ratelimit"
)

// frozen answers a clock stopped at the test's start, so that a flood's
// failures all fall in one of the budget's fixed windows, whenever the
// test runs; on the wall clock a window may end mid-flood and refill the
// budget.
func frozen() func() time.Time {
	at := time.Now()
	return func() time.Time { return at }
}

// from answers a client whose connections leave from the loopback address
// ip, so a test can play two callers at two addresses on one machine.
func from(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, url, key string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// A flood of wrong secrets under the admin key's id never makes the admin
// key answer 429: only requests that authenticated spend a key's budget,
// and failures spend a budget of their own, per client address. Each
// flooding address is told 401 while within its budget, 429 after.
func TestWrongSecretsNeverLockOutTheHolder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// flooders are the addresses the wrong secrets come from; the
		// holder calls from 127.0.0.1.
		flooders []string
		// cached: the node verified the holder's key before the flood
		// (the holder shares the flooder's address only then).
		cached bool
		// want401 is how many of the flood's answers are 401, the rest
		// being 429.
		want401 int
	}{
		{"from another address", []string{"127.0.0.2"}, false, 3},
		{"from several addresses: a budget each, none the key id's", []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}, false, 9},
		{"from the holder's own address, key cached", []string{"127.0.0.1"}, true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.door.Limiter = ratelimit.New(5, time.Minute)
			f.door.Failures = ratelimit.NewFailures(3, time.Minute)
			f.door.Now = frozen()
			if tt.cached {
				f.door.Keys = apikey.NewCache(0, time.Hour)
			}
			admin := f.mintAdmin(t)
			holder := from(t, "127.0.0.1")
			spent := 0
			if tt.cached {
				if resp := get(t, holder, f.srv.URL+"/v1/keys", admin); resp.StatusCode != http.StatusOK {
					t.Fatalf("the holder before the flood: %d", resp.StatusCode)
				}
				spent = 1
			}
			id, _, _ := apikey.Parse(admin)
			wrong := apikey.Key(id, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
			got401, got429 := 0, 0
			for i := range 30 {
				resp := get(t, from(t, tt.flooders[i%len(tt.flooders)]), f.srv.URL+"/v1/keys", wrong)
				switch resp.StatusCode {
				case http.StatusUnauthorized:
					got401++
				case http.StatusTooManyRequests:
					got429++
					if resp.Header.Get("Retry-After") == "" {
						t.Error("a 429 without Retry-After")
					}
				default:
					t.Fatalf("a wrong secret answered %d", resp.StatusCode)
				}
			}
			if got401 != tt.want401 || got429 != 30-tt.want401 {
				t.Errorf("the flood got %d 401s and %d 429s; want %d and %d", got401, got429, tt.want401, 30-tt.want401)
			}
			resp := get(t, holder, f.srv.URL+"/v1/keys", admin)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the holder after the flood: %d", resp.StatusCode)
			}
			if rem, want := resp.Header.Get("X-RateLimit-Remaining"), 5-spent-1; rem != string(rune('0'+want)) {
				t.Errorf("the holder has %s requests left; the flood spent its budget (want %d)", rem, want)
			}
		})
	}
}

// What an authenticated route answers depends on the key: GET /v1/tools
// lists this key's tools, so no shared cache may keep it.
func TestToolListingsAreNotPubliclyCacheable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, path := range []string{"/v1/tools", "/v1/tools/demo.search_tickets"} {
		resp := get(t, http.DefaultClient, f.srv.URL+path, f.agent)
		cc := resp.Header.Get("Cache-Control")
		if resp.StatusCode != http.StatusOK || !strings.Contains(cc, "private") || !strings.Contains(cc, "no-store") {
			t.Errorf("GET %s: %d, Cache-Control %q; want private, no-store", path, resp.StatusCode, cc)
		}
	}
}

// A flood of junk tokens from one address (a NAT, a proxy a holder shares)
// spends that address's failure budget, yet a valid credential presented
// from there afterwards is checked and admitted: an API key the node has
// never cached and a JWT, which is never cached.
func TestJunkFromASharedAddressNeverLocksOutValidCredentials(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.door.Limiter = ratelimit.New(5, time.Minute)
	f.door.Failures = ratelimit.NewFailures(3, time.Minute)
	f.door.Now = frozen()
	f.door.Keys = apikey.NewCache(0, time.Hour)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256)}}})
	}))
	t.Cleanup(jwks.Close)
	f.door.Tokens = &jwtauth.Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: jwks.URL}
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	tok, err := jwt.Signed(signer).Claims(map[string]any{"iss": "https://idp.example", "aud": "toolplane", "sub": "agent-jwt", "org": "org-1",
		"exp": time.Now().Add(time.Hour).Unix(), "toolplane_kind": "agent", "toolplane_tools": []string{"demo.search_tickets"}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	admin := f.mintAdmin(t)
	shared := from(t, "127.0.0.1")
	got429 := 0
	for i := range 30 {
		var junk string
		switch i % 3 {
		case 0:
			junk = "junk-" + strconv.Itoa(i)
		case 1:
			junk = tok[:len(tok)-3] + "abc" // a JWT whose signature fails
		default:
			id, secret, _ := apikey.New(toolplane.CredentialAgent) // a key id nobody holds
			junk = apikey.Key(id, secret)
		}
		switch resp := get(t, shared, f.srv.URL+"/v1/tools", junk); resp.StatusCode {
		case http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			got429++
		default:
			t.Fatalf("junk answered %d", resp.StatusCode)
		}
	}
	if got429 != 27 {
		t.Errorf("the flood got %d 429s past its budget of 3; want 27", got429)
	}
	for _, c := range []struct{ name, token string }{{"an uncached API key", admin}, {"a JWT", tok}} {
		if resp := get(t, shared, f.srv.URL+"/v1/tools", c.token); resp.StatusCode != http.StatusOK {
			t.Errorf("%s from the flooded address: %d, want 200", c.name, resp.StatusCode)
		}
	}
}
