package apikey

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// memStore is a Getter over a map that counts its reads and can be made to
// fail, so a test sees whether an answer came from the cache.
type memStore struct {
	mu    sync.Mutex
	creds map[string]*toolplane.Credential
	reads int
	down  bool
	// afterRead, when set, runs after a read copied its answer, outside
	// the lock: a test holds a read there while the world changes.
	afterRead func()
}

func (s *memStore) GetCredential(_ context.Context, id string) (*toolplane.Credential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.down {
		return nil, errors.New("database is down")
	}
	c, ok := s.creds[id]
	if !ok {
		return nil, toolplane.ErrNotFound
	}
	cp := *c
	if f := s.afterRead; f != nil {
		s.mu.Unlock()
		f()
		s.mu.Lock()
	}
	return &cp, nil
}

func (s *memStore) update(id string, f func(*toolplane.Credential)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.creds[id])
}

func (s *memStore) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// stored mints a key, stores its credential in s and answers the key.
func (s *memStore) stored(t testing.TB, expires time.Time) (id, key string) {
	t.Helper()
	id, secret := mint(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.creds == nil {
		s.creds = map[string]*toolplane.Credential{}
	}
	s.creds[id] = &toolplane.Credential{ID: id, OrganizationID: "org", Kind: toolplane.CredentialAgent, Subject: "agent",
		Tools: []string{"demo.*"}, Hash: Hash(secret), ExpiresAt: expires}
	return id, Key(id, secret)
}

// TestCache walks a cache through steps, each a request at an offset from
// t0 (after an optional change to the world), checking the answer and
// whether the store was read for it.
func TestCache(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const ttl = 30 * time.Second

	type env struct {
		store *memStore
		cache *Cache
		id    string
		key   string // the credential's good key
	}
	type step struct {
		name   string
		at     time.Duration
		change func(e *env)
		key    func(e *env) string // nil: the good key
		want   error               // nil: authenticates
		read   bool                // whether the store is read
	}
	good := func(e *env) string { return e.key }
	wrongSecret := func(e *env) string {
		_, other := mint(t)
		return Key(e.id, other)
	}
	revoke := func(e *env) {
		e.store.update(e.id, func(c *toolplane.Credential) { c.RevokedAt = t0.Add(time.Second) })
	}

	tests := []struct {
		name    string
		expires time.Duration // zero: never
		steps   []step
	}{
		{name: "a hit within the TTL skips the store", steps: []step{
			{name: "first", at: 0, read: true},
			{name: "again", at: time.Second, read: false},
			{name: "just before the TTL", at: ttl - time.Nanosecond, read: false},
			{name: "at the TTL", at: ttl, read: true},
			{name: "after re-verifying", at: ttl + time.Second, read: false},
		}},
		{name: "revocation is seen once the TTL passes", steps: []step{
			{name: "cached", at: 0, read: true},
			{name: "revoked, still within the TTL", at: 2 * time.Second, change: revoke, read: false},
			{name: "after the TTL", at: ttl + time.Second, want: ErrInvalid, read: true},
			{name: "stays refused", at: ttl + 2*time.Second, want: ErrInvalid, read: true},
		}},
		{name: "Forget makes revocation immediate", steps: []step{
			{name: "cached", at: 0, read: true},
			{name: "revoked and forgotten", at: time.Second, change: func(e *env) { revoke(e); e.cache.Forget(e.id) }, want: ErrInvalid, read: true},
		}},
		{name: "an expired key is refused even when cached", expires: 10 * time.Second, steps: []step{
			{name: "cached before expiry", at: 0, read: true},
			{name: "hit before expiry", at: 10*time.Second - time.Nanosecond, read: false},
			{name: "at expiry, from the cache", at: 10 * time.Second, want: ErrInvalid, read: false},
			{name: "after expiry", at: 11 * time.Second, want: ErrInvalid, read: false},
		}},
		{name: "a wrong secret is refused and evicts nothing", steps: []step{
			{name: "cached", at: 0, read: true},
			{name: "wrong secret under the cached id", at: time.Second, key: wrongSecret, want: ErrInvalid, read: true},
			{name: "the good key still hits", at: 2 * time.Second, read: false},
		}},
		{name: "a failure is never cached", steps: []step{
			{name: "wrong secret", at: 0, key: wrongSecret, want: ErrInvalid, read: true},
			{name: "wrong secret again", at: time.Second, key: wrongSecret, want: ErrInvalid, read: true},
			{name: "the good key verifies", at: 2 * time.Second, read: true},
		}},
		{name: "a store outage is never cached", steps: []step{
			{name: "store down", at: 0, change: func(e *env) { e.store.down = true }, want: ErrUnavailable, read: true},
			{name: "store back", at: time.Second, change: func(e *env) { e.store.down = false }, read: true},
			{name: "store down again, answered from the cache", at: 2 * time.Second, change: func(e *env) { e.store.down = true }, read: false},
		}},
		{name: "a malformed key never reaches the store", steps: []step{
			{name: "truncated", at: 0, key: func(e *env) string { return e.key[:len(e.key)-1] }, want: ErrInvalid, read: false},
			{name: "unknown id", at: 0, key: func(e *env) string { _, s := mint(t); id, _ := mint(t); return Key(id, s) }, want: ErrInvalid, read: true},
		}},
		{name: "a clock stepped back does not stretch the TTL", steps: []step{
			{name: "cached", at: 0, read: true},
			{name: "before the entry", at: -time.Second, read: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &env{store: &memStore{}, cache: NewCache(16, ttl)}
			var exp time.Time
			if tt.expires != 0 {
				exp = t0.Add(tt.expires)
			}
			e.id, e.key = e.store.stored(t, exp)
			for _, st := range tt.steps {
				if st.change != nil {
					st.change(e)
				}
				key := good
				if st.key != nil {
					key = st.key
				}
				before := e.store.readCount()
				cred, err := e.cache.Authenticate(t.Context(), e.store, key(e), t0.Add(st.at))
				read := e.store.readCount() > before
				switch {
				case st.want == nil && (err != nil || cred == nil || cred.ID != e.id):
					t.Fatalf("%s: Authenticate = %v, %v; want the credential", st.name, cred, err)
				case st.want != nil && (!errors.Is(err, st.want) || cred != nil):
					t.Fatalf("%s: Authenticate = %v, %v; want %v", st.name, cred, err, st.want)
				case read != st.read:
					t.Fatalf("%s: store read = %v, want %v", st.name, read, st.read)
				}
			}
		})
	}
}

// TestForgetDuringVerification: a verification that read the credential
// before a revocation and its Forget answers (it raced the revocation) but
// leaves nothing cached, so the next request sees the revocation.
func TestForgetDuringVerification(t *testing.T) {
	t.Parallel()
	s := &memStore{}
	id, key := s.stored(t, time.Time{})
	c := NewCache(4, time.Hour)
	read, release := make(chan struct{}), make(chan struct{})
	s.afterRead = func() {
		close(read)
		<-release
	}
	done := make(chan error)
	go func() {
		_, err := c.Authenticate(context.Background(), s, key, time.Now())
		done <- err
	}()
	<-read
	s.mu.Lock()
	s.afterRead = nil
	s.mu.Unlock()
	s.update(id, func(cr *toolplane.Credential) { cr.RevokedAt = time.Now() })
	c.Forget(id)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the verification that raced the revocation: %v", err)
	}
	if c.Len() != 0 {
		t.Fatalf("the cache kept the credential read before the revocation")
	}
	if _, err := c.Authenticate(context.Background(), s, key, time.Now()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("after revocation and Forget: %v, want ErrInvalid", err)
	}
}

// TestCacheAnswersACopy: what one caller does to its credential never
// reaches the cache or another caller.
func TestCacheAnswersACopy(t *testing.T) {
	t.Parallel()
	s := &memStore{}
	_, key := s.stored(t, time.Time{})
	c := NewCache(4, time.Minute)
	now := time.Now()
	first, err := c.Authenticate(t.Context(), s, key, now)
	if err != nil {
		t.Fatal(err)
	}
	first.Tools[0] = "everything.*"
	first.Subject = "someone else"
	second, err := c.Authenticate(t.Context(), s, key, now)
	if err != nil {
		t.Fatal(err)
	}
	if second.Tools[0] != "demo.*" || second.Subject != "agent" {
		t.Fatalf("the cached credential changed with the caller's copy: %+v", second)
	}
	second.Tools[0] = "x"
	if third, _ := c.Authenticate(t.Context(), s, key, now); third.Tools[0] != "demo.*" {
		t.Fatalf("the cached credential changed with a hit's copy: %+v", third)
	}
}

// TestCloneCoversCredential fails when Credential gains a field that
// shares memory on copy, which clone would then share between callers.
func TestCloneCoversCredential(t *testing.T) {
	t.Parallel()
	cloned := map[string]bool{"Roles": true, "Tools": true, "Hash": true, "User": true, "Attributes": true}
	typ := reflect.TypeFor[toolplane.Credential]()
	for f := range typ.Fields() {
		switch f.Type.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func:
			if !cloned[f.Name] {
				t.Errorf("Credential.%s (%s) is shared by a shallow copy; make clone copy it", f.Name, f.Type)
			}
		}
	}
}

func TestCacheBound(t *testing.T) {
	t.Parallel()
	const size = 3
	tests := []struct {
		name  string
		keys  int
		space time.Duration // between requests
	}{
		{"more fresh keys than room", 8, time.Second},
		{"stale entries make room first", 8, 20 * time.Second},
		{"exactly full", size, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &memStore{}
			c := NewCache(size, 30*time.Second)
			now := time.Now()
			var keys []string
			for range tt.keys {
				_, key := s.stored(t, time.Time{})
				keys = append(keys, key)
			}
			for round := range 2 {
				for i, key := range keys {
					now = now.Add(tt.space)
					if _, err := c.Authenticate(t.Context(), s, key, now); err != nil {
						t.Fatalf("round %d key %d: %v", round, i, err)
					}
					if n := c.Len(); n > size {
						t.Fatalf("round %d key %d: the cache holds %d entries, bound %d", round, i, n, size)
					}
				}
			}
			if tt.keys <= size && s.readCount() != tt.keys {
				t.Errorf("store read %d times for %d keys that all fit", s.readCount(), tt.keys)
			}
		})
	}
}

func TestNilCache(t *testing.T) {
	t.Parallel()
	s := &memStore{}
	_, key := s.stored(t, time.Time{})
	var c *Cache
	for i := range 2 {
		if _, err := c.Authenticate(t.Context(), s, key, time.Now()); err != nil {
			t.Fatalf("nil cache, request %d: %v", i, err)
		}
	}
	c.Forget("x")
	if s.readCount() != 2 || c.Len() != 0 {
		t.Fatalf("a nil cache cached: %d reads, %d entries", s.readCount(), c.Len())
	}
	if _, err := (Authenticator{Store: s}).Authenticate(t.Context(), key, time.Now()); err != nil {
		t.Fatalf("Authenticator without a cache: %v", err)
	}
}

func TestAuthenticatorUsesItsCache(t *testing.T) {
	t.Parallel()
	s := &memStore{}
	_, key := s.stored(t, time.Time{})
	a := Authenticator{Store: s, Cache: NewCache(0, 0)}
	for i := range 3 {
		if _, err := a.Authenticate(t.Context(), key, time.Now()); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if s.readCount() != 1 {
		t.Fatalf("store read %d times, want 1", s.readCount())
	}
}

// TestCacheConcurrent is for the race detector: hits, misses, failures,
// evictions and Forget at once.
func TestCacheConcurrent(t *testing.T) {
	t.Parallel()
	s := &memStore{}
	var ids, keys []string
	for range 4 {
		id, key := s.stored(t, time.Time{})
		ids, keys = append(ids, id), append(keys, key)
	}
	c := NewCache(2, time.Hour)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := keys[(g+i)%len(keys)]
				if _, err := c.Authenticate(context.Background(), s, k, time.Now()); err != nil {
					t.Errorf("goroutine %d request %d: %v", g, i, err)
					return
				}
				if i%10 == 0 {
					c.Forget(ids[g%len(ids)])
				}
			}
		})
	}
	wg.Wait()
	if c.Len() > 2 {
		t.Fatalf("cache holds %d entries, bound 2", c.Len())
	}
}

func BenchmarkCacheHit(b *testing.B) {
	s := &memStore{}
	_, key := s.stored(b, time.Time{})
	c := NewCache(0, time.Hour)
	now := time.Now()
	if _, err := c.Authenticate(context.Background(), s, key, now); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Authenticate(context.Background(), s, key, now); err != nil {
				panic(fmt.Sprint(err))
			}
		}
	})
}

func TestTouchDue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const ttl = 30 * time.Second
	s := &memStore{}
	id, key := s.stored(t, time.Time{})
	c := NewCache(4, ttl)
	if !c.TouchDue(id, t0) || !c.TouchDue(id, t0) {
		t.Fatal("a key the cache does not hold is not always due")
	}
	if _, err := c.Authenticate(t.Context(), s, key, t0); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		at   time.Duration
		want bool
	}{
		{"first use", time.Second, true},
		{"again at once", time.Second, false},
		{"within the TTL", ttl, false},
		{"a TTL after the touch", ttl + time.Second, true},
		{"the clock went back", 0, true},
	}
	for _, st := range steps {
		if got := c.TouchDue(id, t0.Add(st.at)); got != st.want {
			t.Fatalf("%s: TouchDue = %v, want %v", st.name, got, st.want)
		}
	}
	var nilCache *Cache
	if !nilCache.TouchDue(id, t0) || !nilCache.TouchDue(id, t0) {
		t.Fatal("a nil cache does not always touch")
	}

	// Many requests at once: one of them touches.
	_, key2 := s.stored(t, time.Time{})
	cred, err := c.Authenticate(t.Context(), s, key2, t0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	due := 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if c.TouchDue(cred.ID, t0) {
				mu.Lock()
				due++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if due != 1 {
		t.Fatalf("%d of 16 concurrent requests were due a touch, want 1", due)
	}
}
