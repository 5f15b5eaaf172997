package apikey

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolplane/toolplane"
)

// Defaults for NewCache. The TTL bounds how long a revocation made on
// another node (or straight in the database) goes unnoticed here; 30 s is
// short enough for an operator pulling a leaked key and long enough that
// Argon2id and the credential read are paid about once per key per 30 s
// rather than on every request. The size comfortably exceeds the keys one
// node sees in a TTL; an entry is a few hundred bytes.
const (
	DefaultCacheTTL  = 30 * time.Second
	DefaultCacheSize = 10_000
)

// Cache remembers keys that verified, so a key presented again within the
// TTL is answered without reading the store or running Argon2id, which
// together would otherwise cap a node at a few hundred requests per second
// per core.
//
// What it trades, and what it keeps:
//
//   - A revocation (or any change to the stored credential) takes effect
//     here within the TTL; Forget makes it immediate on this node.
//   - Expiry is checked against the caller's now on every request, cached
//     or not, so an expired key is refused at its expiry, never a TTL late.
//   - Only successes are remembered. A wrong secret, an unknown or revoked
//     key, and a store that cannot answer all leave no entry, so a failure
//     is never answered as a success and nothing an unauthenticated caller
//     sends can fill the cache.
//   - An entry holds the SHA-256 digest of the whole presented key, compared
//     in constant time; the key itself is not kept. A hit proves the caller
//     presented the same 256-bit secret the store's hash verified.
//   - At most size entries are kept.
//
// Entries are found by the key's public ID, so a key has at most one entry
// and Forget finds it; a wrong secret presented under a cached ID misses,
// pays the full verification and fails, and does not evict the entry (which
// would let anyone who knows an ID make its holder pay Argon2id again).
//
// A nil *Cache is valid and caches nothing. A Cache is safe for concurrent
// use, and must be shared by every door of a node (one per process, not
// one per request) for it to be of use.
type Cache struct {
	ttl  time.Duration
	size int

	mu      sync.RWMutex
	entries map[string]*cacheEntry // by credential ID
	// forgets counts Forget calls. A verification that read the store
	// before a Forget does not cache what it read: it may be the copy the
	// revocation just replaced.
	forgets atomic.Uint64
}

type cacheEntry struct {
	digest     [sha256.Size]byte
	cred       toolplane.Credential
	verifiedAt time.Time
	// touchedAt is when TouchDue last answered true for the entry, in Unix
	// nanoseconds; atomic, so the hit path stays under the read lock.
	touchedAt atomic.Int64
}

// NewCache answers a cache of at most size keys, each trusted for ttl after
// it verified. A size or ttl of zero or less takes the default.
func NewCache(size int, ttl time.Duration) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	return &Cache{ttl: ttl, size: size, entries: make(map[string]*cacheEntry)}
}

// Authenticate answers what the package-level Authenticate answers for key
// at now, from the cache when the key verified within the TTL. The
// credential answered is the caller's own copy; its LastUsedAt may be up to
// a TTL old.
func (c *Cache) Authenticate(ctx context.Context, store Getter, key string, now time.Time) (*toolplane.Credential, error) {
	id, secret, err := Parse(key)
	if err != nil {
		return nil, ErrInvalid
	}
	if c == nil {
		return verify(ctx, store, id, secret, now)
	}
	digest := keyDigest(key)
	if cred, ok := c.lookup(id, &digest, now); ok {
		if expired(&cred, now) {
			return nil, ErrInvalid
		}
		return clone(&cred), nil
	}
	forgets := c.forgets.Load()
	cred, err := verify(ctx, store, id, secret, now)
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			c.dropStale(id, now)
		}
		return nil, err
	}
	c.put(id, &digest, cred, now, forgets)
	return cred, nil
}

// Cached answers the credential key authenticates at now when the cache
// can tell without the store: the key verified within the TTL and has not
// expired. It never runs Argon2id nor reads the store, so a door may ask it
// before deciding whether a full verification is worth its cost.
func (c *Cache) Cached(key string, now time.Time) (*toolplane.Credential, bool) {
	if c == nil || len(key) != keyLen {
		return nil, false
	}
	id, _, err := Parse(key)
	if err != nil {
		return nil, false
	}
	digest := keyDigest(key)
	cred, ok := c.lookup(id, &digest, now)
	if !ok || expired(&cred, now) {
		return nil, false
	}
	return clone(&cred), true
}

// Forget drops id's entry, so the next request with that key reads the
// store again: call it after revoking or changing the credential to make
// the change immediate on this node.
func (c *Cache) Forget(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.forgets.Add(1)
	delete(c.entries, id)
	c.mu.Unlock()
}

// TouchDue reports whether a use of credential id at now should be
// recorded (toolplane.CredentialStore.TouchCredential): true for a key the
// cache does not hold, and otherwise at most once per TTL per entry. A
// touch is a durable write, and one per read call would make every read a
// write serialised on the database; a last-use time accurate to the TTL
// tells an operator whether a key is in use just as well.
func (c *Cache) TouchDue(id string, now time.Time) bool {
	if c == nil {
		return true
	}
	c.mu.RLock()
	e := c.entries[id]
	c.mu.RUnlock()
	if e == nil {
		return true
	}
	for {
		last := e.touchedAt.Load()
		if age := now.UnixNano() - last; last != 0 && age >= 0 && age < int64(c.ttl) {
			return false
		}
		if e.touchedAt.CompareAndSwap(last, now.UnixNano()) {
			return true
		}
	}
}

// Len answers how many keys the cache holds, fresh or stale.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// lookup answers a copy of id's credential when its entry is fresh at now
// and was made from a key with this digest. A clock that went back past
// the entry counts as stale, so a stepped clock cannot stretch the TTL.
func (c *Cache) lookup(id string, digest *[sha256.Size]byte, now time.Time) (toolplane.Credential, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := c.entries[id]
	if e == nil || !c.fresh(e, now) || subtle.ConstantTimeCompare(e.digest[:], digest[:]) != 1 {
		return toolplane.Credential{}, false
	}
	return e.cred, true
}

func (c *Cache) fresh(e *cacheEntry, now time.Time) bool {
	age := now.Sub(e.verifiedAt)
	return age >= 0 && age < c.ttl
}

// put remembers cred as verified at now from a key with digest, unless a
// Forget came after the store was read (forgets is the count before), making
// room when the cache is full: stale entries go first, then arbitrary ones
// (Go randomises map iteration), which keeps the bound without the
// bookkeeping of an LRU list on the hit path. Only verified keys reach here,
// so only key holders can fill it.
func (c *Cache) put(id string, digest *[sha256.Size]byte, cred *toolplane.Credential, now time.Time, forgets uint64) {
	e := &cacheEntry{digest: *digest, cred: *clone(cred), verifiedAt: now}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgets.Load() != forgets {
		return
	}
	if _, ok := c.entries[id]; !ok && len(c.entries) >= c.size {
		for k, old := range c.entries {
			if !c.fresh(old, now) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.size {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[id] = e
}

// dropStale forgets id's entry when it is no longer fresh: the store has
// just refused the key, so the entry would never answer again. A fresh
// entry stays, because the refusal may be of someone else's wrong secret.
func (c *Cache) dropStale(id string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[id]; e != nil && !c.fresh(e, now) {
		delete(c.entries, id)
	}
}

func expired(cred *toolplane.Credential, now time.Time) bool {
	return !cred.ExpiresAt.IsZero() && !now.Before(cred.ExpiresAt)
}

// keyDigest is the SHA-256 of key, hashed from a copy on the stack: a key
// is longer than the bytes a conversion may keep there, so []byte(key)
// would allocate on every request.
func keyDigest(key string) [sha256.Size]byte {
	if len(key) != keyLen {
		return sha256.Sum256([]byte(key))
	}
	var b [keyLen]byte
	copy(b[:], key)
	return sha256.Sum256(b[:])
}

// clone copies cred deeply enough that no two callers, nor a caller and the
// cache, share a slice one of them might change.
func clone(cred *toolplane.Credential) *toolplane.Credential {
	c := *cred
	c.Roles = slices.Clone(cred.Roles)
	c.Tools = slices.Clone(cred.Tools)
	c.Hash = slices.Clone(cred.Hash)
	c.Attributes = maps.Clone(cred.Attributes)
	if u := cred.User; u != nil {
		c.User = &toolplane.User{Roles: slices.Clone(u.Roles), Groups: slices.Clone(u.Groups), Manager: u.Manager, Attributes: maps.Clone(u.Attributes)}
	}
	return &c
}
