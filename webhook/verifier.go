package webhook

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Memory is where a Verifier keeps what it accepted until the window has
// passed: the in-process Recent by default, or a receiver's durable store
// when several processes receive for one endpoint, or a restart must not
// forget.
type Memory interface {
	// Remember records key until until and answers true, or answers
	// false when key is recorded already with an until after now.
	// Concurrent calls with one key answer true once.
	Remember(ctx context.Context, key string, now, until time.Time) (bool, error)
	// Forget drops key, so the next Remember of it answers true.
	Forget(ctx context.Context, key string) error
}

// Config is what a Verifier is built from.
type Config struct {
	// Secrets are the keys a request may be signed with, each tried:
	// during a rotation, the old and the new. At least one is required.
	Secrets [][]byte
	// Tolerance is how far a timestamp may be from now, either way;
	// DefaultTolerance when zero.
	Tolerance time.Duration
	// Memory keeps accepted deliveries; a Recent of DefaultCapacity
	// when nil.
	Memory Memory
	// Now is the receiver's clock; time.Now when nil.
	Now func() time.Time
}

// Verifier is a receiver's whole check of a signed request: Check's, and
// a delivery or signed message accepted once within the window. It is
// safe for concurrent use.
type Verifier struct {
	secrets   [][]byte
	tolerance time.Duration
	memory    Memory
	now       func() time.Time
}

// NewVerifier answers a Verifier built from cfg. It keeps its own copy of
// the secrets.
func NewVerifier(cfg Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, errors.New("webhook: a verifier needs at least one secret")
	}
	v := &Verifier{tolerance: cfg.Tolerance, memory: cfg.Memory, now: cfg.Now}
	for i, s := range cfg.Secrets {
		if len(s) == 0 {
			return nil, fmt.Errorf("webhook: secret %d is empty", i)
		}
		v.secrets = append(v.secrets, append([]byte(nil), s...))
	}
	if v.tolerance <= 0 {
		v.tolerance = DefaultTolerance
	}
	if v.memory == nil {
		v.memory = NewRecent(DefaultCapacity)
	}
	if v.now == nil {
		v.now = time.Now
	}
	return v, nil
}

// Verify checks a request by its headers and raw body, in order: the
// headers well formed (ErrMalformed), the timestamp within the tolerance
// (ErrStale), a signature matching (ErrSignature), and neither its
// delivery id nor its signed message accepted already within the window
// (ErrReplay). Only a request whose signature holds is remembered, so a
// forger cannot spend a genuine delivery's id. Another error (the
// Memory's) is the receiver's fault: answer it 5xx so the sender retries.
func (v *Verifier) Verify(ctx context.Context, h http.Header, body []byte) error {
	delivery := h.Get(HeaderDelivery)
	if err := checkDelivery(delivery); err != nil {
		return err
	}
	timestamp := h.Get(HeaderTimestamp)
	now := v.now()
	if err := Check(v.secrets, timestamp, h.Get(HeaderSignature), body, now, v.tolerance); err != nil {
		return err
	}
	ts, _ := ParseTimestamp(timestamp)
	// Kept until no copy of this request, nor a retry stamped now, can
	// pass the stale check any more.
	until := time.Unix(ts, 0)
	if now.After(until) {
		until = now
	}
	until = until.Add(v.tolerance)
	fresh, err := v.memory.Remember(ctx, messageKey(timestamp, body), now, until)
	if err != nil {
		return fmt.Errorf("webhook: remember the message: %w", err)
	}
	if !fresh {
		return fmt.Errorf("%w: this signed message was accepted already", ErrReplay)
	}
	fresh, err = v.memory.Remember(ctx, deliveryKey(delivery), now, until)
	if err != nil {
		return fmt.Errorf("webhook: remember the delivery: %w", err)
	}
	if !fresh {
		return fmt.Errorf("%w: delivery %q was accepted already", ErrReplay, delivery)
	}
	return nil
}

// Forget undoes what Verify remembered of a request, so the sender's
// retry of it is accepted: for a receiver that verified a request and
// then failed to act on it.
func (v *Verifier) Forget(ctx context.Context, h http.Header, body []byte) error {
	if err := v.memory.Forget(ctx, deliveryKey(h.Get(HeaderDelivery))); err != nil {
		return fmt.Errorf("webhook: forget the delivery: %w", err)
	}
	if err := v.memory.Forget(ctx, messageKey(h.Get(HeaderTimestamp), body)); err != nil {
		return fmt.Errorf("webhook: forget the message: %w", err)
	}
	return nil
}

// Middleware answers a handler that verifies each request before next
// sees it: the body (at most maxBody bytes; 1 MiB when zero) read whole
// and given to next again, a refusal answered 401 (400 when malformed),
// a replay 200 with nothing done, and a Memory failure 503. When next
// answers 5xx the request is forgotten, so the sender's retry reaches
// next again.
func (v *Verifier) Middleware(maxBody int64, next http.Handler) http.Handler {
	if maxBody <= 0 {
		maxBody = 1 << 20
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		err = v.Verify(r.Context(), r.Header, body)
		switch {
		case err == nil:
			r.Body = io.NopCloser(bytes.NewReader(body))
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(sw, r)
			if sw.status >= 500 {
				// Nothing to do if this fails too: the retry is
				// then answered as a replay, as it would have been.
				_ = v.Forget(context.WithoutCancel(r.Context()), r.Header, body)
			}
		case errors.Is(err, ErrReplay):
			// The sender repeats only what it does not know arrived.
			w.WriteHeader(http.StatusOK)
		case errors.Is(err, ErrMalformed):
			http.Error(w, CheckName(err), http.StatusBadRequest)
		case CheckName(err) != "":
			http.Error(w, CheckName(err), http.StatusUnauthorized)
		default:
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		}
	})
}

// statusWriter notes the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer beneath.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// checkDelivery refuses a missing, overlong or control-character
// delivery id.
func checkDelivery(d string) error {
	if d == "" || len(d) > maxDelivery {
		return fmt.Errorf("%w: %s is missing or longer than %d bytes", ErrMalformed, HeaderDelivery, maxDelivery)
	}
	for i := 0; i < len(d); i++ {
		if d[i] < 0x20 || d[i] == 0x7f {
			return fmt.Errorf("%w: %s holds a control character", ErrMalformed, HeaderDelivery)
		}
	}
	return nil
}

func deliveryKey(d string) string { return "delivery:" + d }

// messageKey names a signed message by its digest: what the signature
// covers, so no header rewrite gives a replay another key.
func messageKey(timestamp string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return "message:" + hex.EncodeToString(h.Sum(nil))
}

// DefaultCapacity is how many keys a Verifier's default Recent holds: two
// per accepted request, for as long as the window.
const DefaultCapacity = 100_000

// ErrFull: a Recent holds as many unexpired keys as it may. The request is
// refused (nothing is evicted early, which would let a replay through)
// and the sender retries later.
var ErrFull = errors.New("webhook: replay memory full")

// Recent is the in-process Memory: bounded, safe for concurrent use, and
// forgotten when the process ends.
type Recent struct {
	mu       sync.Mutex
	capacity int
	until    map[string]time.Time
	order    expiries
}

// NewRecent answers a Recent holding at most capacity unexpired keys
// (DefaultCapacity when capacity < 1).
func NewRecent(capacity int) *Recent {
	if capacity < 1 {
		capacity = DefaultCapacity
	}
	return &Recent{capacity: capacity, until: map[string]time.Time{}}
}

// Remember implements Memory.
func (m *Recent) Remember(_ context.Context, key string, now, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	if u, ok := m.until[key]; ok && u.After(now) {
		return false, nil
	}
	if len(m.until) >= m.capacity {
		return false, fmt.Errorf("%w: %d keys", ErrFull, m.capacity)
	}
	m.until[key] = until
	heap.Push(&m.order, expiry{key: key, until: until})
	return true, nil
}

// Forget implements Memory.
func (m *Recent) Forget(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.until, key)
	// The key's place in the order is left to expire; the order is
	// rebuilt when such leftovers outnumber the keys.
	if len(m.order) > 2*len(m.until)+64 {
		m.order = m.order[:0]
		for k, u := range m.until {
			m.order = append(m.order, expiry{key: k, until: u})
		}
		heap.Init(&m.order)
	}
	return nil
}

// Len answers how many keys are held, expired or not.
func (m *Recent) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.until)
}

// expire drops every key whose until is not after now.
func (m *Recent) expire(now time.Time) {
	for len(m.order) > 0 && !m.order[0].until.After(now) {
		e := heap.Pop(&m.order).(expiry)
		if u, ok := m.until[e.key]; ok && u.Equal(e.until) {
			delete(m.until, e.key)
		}
	}
}

type expiry struct {
	key   string
	until time.Time
}

// expiries is a min-heap of expiries by until.
type expiries []expiry

func (e expiries) Len() int           { return len(e) }
func (e expiries) Less(i, j int) bool { return e[i].until.Before(e[j].until) }
func (e expiries) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *expiries) Push(x any)        { *e = append(*e, x.(expiry)) }
func (e *expiries) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}
