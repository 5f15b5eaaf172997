package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane/webhook"
)

var (
	oldKey = []byte("old-secret-0123456789abcdef0123456789")
	newKey = []byte("new-secret-0123456789abcdef0123456789")
	body   = []byte(`{"invocation":"inv_1","status":"succeeded"}`)
	now    = time.Unix(1_800_000_000, 0)
)

// The v1 entry is the HMAC-SHA256 of "<ts>.<body>", in lower-case hex:
// the wire format notification webhooks have always had.
func TestSignIsTheDocumentedMAC(t *testing.T) {
	t.Parallel()
	// echo -n '1800000000.{}' | openssl dgst -sha256 -hmac key
	got := webhook.Sign([]byte("key"), 1_800_000_000, []byte("{}"))
	if want := "v1=7321475872b03ff21bdc2dfd86ea2d99ec29c479fbe4a77aa6acf4509505493f"; got != want {
		t.Fatalf("Sign = %q; want %q", got, want)
	}
	if got != webhook.Signature([][]byte{[]byte("key")}, 1_800_000_000, []byte("{}")) {
		t.Error("Signature with one key differs from Sign")
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	ts := strconv.FormatInt(now.Unix(), 10)
	both := webhook.Signature([][]byte{newKey, oldKey}, now.Unix(), body)
	for _, tt := range []struct {
		name      string
		keys      [][]byte
		timestamp string
		signature string
		body      []byte
		at        time.Time
		want      error
	}{
		{"signed by the one key", [][]byte{oldKey}, ts, webhook.Sign(oldKey, now.Unix(), body), body, now, nil},
		{"both signatures, receiver holds the old key", [][]byte{oldKey}, ts, both, body, now, nil},
		{"both signatures, receiver holds the new key", [][]byte{newKey}, ts, both, body, now, nil},
		{"one signature, receiver holds both keys", [][]byte{newKey, oldKey}, ts, webhook.Sign(oldKey, now.Unix(), body), body, now, nil},
		{"unknown scheme beside v1 is skipped", [][]byte{oldKey}, ts, "v9=zz, " + webhook.Sign(oldKey, now.Unix(), body), body, now, nil},
		{"other key", [][]byte{newKey}, ts, webhook.Sign(oldKey, now.Unix(), body), body, now, webhook.ErrSignature},
		{"body changed", [][]byte{oldKey}, ts, webhook.Sign(oldKey, now.Unix(), body), []byte(`{}`), now, webhook.ErrSignature},
		{"timestamp changed", [][]byte{oldKey}, strconv.FormatInt(now.Unix()+1, 10), webhook.Sign(oldKey, now.Unix(), body), body, now, webhook.ErrSignature},
		{"no keys", nil, ts, webhook.Sign(oldKey, now.Unix(), body), body, now, webhook.ErrSignature},
		{"six minutes late", [][]byte{oldKey}, ts, webhook.Sign(oldKey, now.Unix(), body), body, now.Add(6 * time.Minute), webhook.ErrStale},
		{"six minutes early", [][]byte{oldKey}, ts, webhook.Sign(oldKey, now.Unix(), body), body, now.Add(-6 * time.Minute), webhook.ErrStale},
		{"four minutes late", [][]byte{oldKey}, ts, webhook.Sign(oldKey, now.Unix(), body), body, now.Add(4 * time.Minute), nil},
		{"timestamp missing", [][]byte{oldKey}, "", webhook.Sign(oldKey, now.Unix(), body), body, now, webhook.ErrMalformed},
		{"timestamp signed", [][]byte{oldKey}, "+" + ts, webhook.Sign(oldKey, now.Unix(), body), body, now, webhook.ErrMalformed},
		{"timestamp in milliseconds is stale, not malformed", [][]byte{oldKey}, ts + "000", webhook.Sign(oldKey, now.Unix(), body), body, now, webhook.ErrStale},
		{"signature missing", [][]byte{oldKey}, ts, "", body, now, webhook.ErrMalformed},
		{"bare hex", [][]byte{oldKey}, ts, strings.TrimPrefix(webhook.Sign(oldKey, now.Unix(), body), "v1="), body, now, webhook.ErrMalformed},
		{"short hex", [][]byte{oldKey}, ts, "v1=abcd", body, now, webhook.ErrMalformed},
		{"only another scheme", [][]byte{oldKey}, ts, "v2=abcd", body, now, webhook.ErrMalformed},
		{"empty entry", [][]byte{oldKey}, ts, webhook.Sign(oldKey, now.Unix(), body) + ",", body, now, webhook.ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := webhook.Check(tt.keys, tt.timestamp, tt.signature, tt.body, tt.at, 5*time.Minute)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Check = %v; want %v", err, tt.want)
			}
			if err != nil && (strings.Contains(err.Error(), string(oldKey)) || strings.Contains(err.Error(), string(newKey))) {
				t.Errorf("the error %q quotes a secret", err)
			}
		})
	}
}

func TestParseSignatureBounds(t *testing.T) {
	t.Parallel()
	one := webhook.Sign(oldKey, 1, body)
	for _, tt := range []struct {
		name   string
		header string
		n      int
	}{
		{"one", one, 1},
		{"two with spaces", one + " , " + one, 2},
		{"sixteen", strings.Repeat(one+",", 15) + one, 16},
		{"seventeen", strings.Repeat(one+",", 16) + one, 0},
		{"too long", "v2=" + strings.Repeat("a", 5000) + "," + one, 0},
		{"upper-case hex", "v1=" + strings.ToUpper(strings.TrimPrefix(one, "v1=")), 1},
		{"no scheme", "=" + strings.TrimPrefix(one, "v1="), 0},
	} {
		macs, err := webhook.ParseSignature(tt.header)
		if tt.n == 0 && !errors.Is(err, webhook.ErrMalformed) || tt.n > 0 && (err != nil || len(macs) != tt.n) {
			t.Errorf("%s: ParseSignature = %d MACs, %v; want %d", tt.name, len(macs), err, tt.n)
		}
	}
}

// clock is a receiver's clock a test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func signed(keys [][]byte, delivery string, at time.Time) http.Header {
	return webhook.Headers(keys, delivery, body, at)
}

func TestVerifierRefusesReplays(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		second func(first http.Header, at time.Time) http.Header
		after  time.Duration
		want   error
	}{
		{"the same request again", func(h http.Header, _ time.Time) http.Header { return h }, time.Minute, webhook.ErrReplay},
		// The delivery header is not signed: rewriting it does not make
		// the same signed message new.
		{"the same request with another delivery id", func(h http.Header, _ time.Time) http.Header {
			h = h.Clone()
			h.Set(webhook.HeaderDelivery, "dlv_other")
			return h
		}, time.Minute, webhook.ErrReplay},
		{"a retry of the delivery, signed anew", func(_ http.Header, at time.Time) http.Header {
			return signed([][]byte{oldKey}, "dlv_1", at)
		}, time.Minute, webhook.ErrReplay},
		{"another delivery", func(_ http.Header, at time.Time) http.Header {
			return signed([][]byte{oldKey}, "dlv_2", at)
		}, time.Minute, nil},
		{"the same request after the window is stale", func(h http.Header, _ time.Time) http.Header { return h }, 6 * time.Minute, webhook.ErrStale},
		{"a retry of the delivery after the window is accepted", func(_ http.Header, at time.Time) http.Header {
			return signed([][]byte{oldKey}, "dlv_1", at)
		}, 6 * time.Minute, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &clock{t: now}
			v, err := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{oldKey}, Now: c.now})
			if err != nil {
				t.Fatal(err)
			}
			first := signed([][]byte{oldKey}, "dlv_1", c.now())
			if err := v.Verify(t.Context(), first, body); err != nil {
				t.Fatalf("first: %v", err)
			}
			c.add(tt.after)
			err = v.Verify(t.Context(), tt.second(first, c.now()), body)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("second = %v; want %v", err, tt.want)
			}
		})
	}
}

// A request that fails its signature is not remembered: a forger who
// knows a delivery id cannot spend it before the genuine request arrives.
func TestAForgeryDoesNotSpendADeliveryID(t *testing.T) {
	t.Parallel()
	v, _ := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{oldKey}, Now: func() time.Time { return now }})
	forged := signed([][]byte{[]byte("not the secret")}, "dlv_1", now)
	if err := v.Verify(t.Context(), forged, body); !errors.Is(err, webhook.ErrSignature) {
		t.Fatalf("forgery: %v", err)
	}
	if err := v.Verify(t.Context(), signed([][]byte{oldKey}, "dlv_1", now), body); err != nil {
		t.Fatalf("genuine after forgery: %v", err)
	}
}

func TestVerifierForgetLetsTheRetryIn(t *testing.T) {
	t.Parallel()
	v, _ := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{oldKey}, Now: func() time.Time { return now }})
	h := signed([][]byte{oldKey}, "dlv_1", now)
	if err := v.Verify(t.Context(), h, body); err != nil {
		t.Fatal(err)
	}
	if err := v.Forget(t.Context(), h, body); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(t.Context(), h, body); err != nil {
		t.Fatalf("after Forget: %v", err)
	}
}

func TestVerifierMalformedDelivery(t *testing.T) {
	t.Parallel()
	v, _ := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{oldKey}, Now: func() time.Time { return now }})
	for _, d := range []string{"", strings.Repeat("d", 257), "a\x01b"} {
		h := signed([][]byte{oldKey}, "x", now)
		h[webhook.HeaderDelivery] = []string{d}
		if err := v.Verify(t.Context(), h, body); !errors.Is(err, webhook.ErrMalformed) {
			t.Errorf("delivery %q: %v; want malformed", d, err)
		}
	}
}

// Many goroutines verifying one request: exactly one is accepted.
func TestVerifierConcurrentReplayAcceptedOnce(t *testing.T) {
	t.Parallel()
	v, _ := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{oldKey}, Now: func() time.Time { return now }})
	h := signed([][]byte{oldKey}, "dlv_1", now)
	var ok, replay atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			switch err := v.Verify(context.Background(), h, body); {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, webhook.ErrReplay):
				replay.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || replay.Load() != 63 {
		t.Fatalf("accepted %d, replays %d; want 1 and 63", ok.Load(), replay.Load())
	}
}

// A full memory refuses (the sender retries) rather than evicting what
// has not expired, which would let a replay through; expired keys make
// room.
func TestRecentIsBounded(t *testing.T) {
	t.Parallel()
	m := webhook.NewRecent(2)
	ctx := t.Context()
	for _, k := range []string{"a", "b"} {
		if ok, err := m.Remember(ctx, k, now, now.Add(time.Minute)); !ok || err != nil {
			t.Fatalf("Remember(%s) = %v, %v", k, ok, err)
		}
	}
	if _, err := m.Remember(ctx, "c", now, now.Add(time.Minute)); !errors.Is(err, webhook.ErrFull) {
		t.Fatalf("third key: %v; want ErrFull", err)
	}
	if ok, _ := m.Remember(ctx, "a", now, now.Add(time.Minute)); ok {
		t.Fatal("a key remembered twice")
	}
	later := now.Add(time.Minute)
	if ok, err := m.Remember(ctx, "c", later, later.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("after expiry: %v, %v", ok, err)
	}
	if m.Len() != 1 {
		t.Fatalf("Len = %d; want the expired keys gone", m.Len())
	}
	for i := range 1000 {
		k := fmt.Sprint("k", i%2)
		m.Remember(ctx, k, later, later.Add(time.Minute))
		m.Forget(ctx, k)
	}
	if m.Len() != 1 {
		t.Fatalf("Len = %d after forgetting", m.Len())
	}
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	v, _ := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{oldKey}})
	var got atomic.Int64
	srv := httptest.NewServer(v.Middleware(0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, len(body)+1)
		n, _ := r.Body.Read(b)
		if string(b[:n]) != string(body) {
			t.Errorf("the next handler read %q", b[:n])
		}
		got.Add(1)
	})))
	defer srv.Close()
	send := func(h http.Header) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	h := signed([][]byte{oldKey}, "dlv_1", time.Now())
	forged := signed([][]byte{newKey}, "dlv_2", time.Now())
	for _, tt := range []struct {
		h    http.Header
		want int
	}{{h, 200}, {h, 200}, {forged, 401}, {http.Header{}, 400}} {
		if code := send(tt.h); code != tt.want {
			t.Errorf("status %d; want %d", code, tt.want)
		}
	}
	if got.Load() != 1 {
		t.Errorf("the next handler ran %d times; want once", got.Load())
	}
}

// A request the next handler failed (5xx) is forgotten: the sender's
// retry of it reaches the handler again, and once it succeeds a further
// retry is a replay.
func TestMiddlewareForgetsWhatFailed(t *testing.T) {
	t.Parallel()
	v, _ := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{oldKey}})
	var calls atomic.Int64
	srv := httptest.NewServer(v.Middleware(0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "database down", http.StatusInternalServerError)
		}
	})))
	defer srv.Close()
	h := signed([][]byte{oldKey}, "dlv_1", time.Now())
	for i, want := range []int{500, 200, 200} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("attempt %d: %d; want %d", i+1, resp.StatusCode, want)
		}
	}
	if calls.Load() != 2 {
		t.Errorf("the handler ran %d times; want twice (the failure, then the retry)", calls.Load())
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", webhook.ErrMalformed): "malformed", webhook.ErrStale: "stale",
		webhook.ErrSignature: "signature", webhook.ErrReplay: "replay", errors.New("other"): "",
	} {
		if got := webhook.CheckName(err); got != want {
			t.Errorf("CheckName(%v) = %q; want %q", err, got, want)
		}
	}
}
