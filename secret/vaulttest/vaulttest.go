// Package vaulttest is an IMITATION of Vault's documented KV version 2
// HTTP API, served on loopback for tests. It is not Vault or OpenBao and
// is not derived from their code: no Vault server could be installed
// where these tests are written, so this server reproduces, from the
// published API documentation, exactly the request and response shapes
// the secret package's client relies on, and nothing more (no leases, no
// policies beyond two kinds of token, no metadata endpoints):
//
//	GET  /v1/{mount}/data/{path}  200 {"data":{"data":{...},"metadata":{"version":N,...}}}
//	                              404 {"errors":[]} when the entry does not exist
//	                              404 with data null and a deletion_time when
//	                              its newest version was deleted
//	POST /v1/{mount}/data/{path}  {"options":{"cas":N},"data":{...}}
//	                              200 {"data":{"version":N,...}}
//	                              400 {"errors":["check-and-set parameter did not match the current version"]}
//	any, token without access     403 {"errors":["permission denied"]}
//
// It serves one mount, "secret" (where a dev server mounts KV version 2).
// The secret package's TestVaultDevServer holds a real dev server (vault
// or bao, when one is on PATH) to the same checks as this imitation.
package vaulttest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Mount is the one KV version 2 mount the server serves.
const Mount = "secret"

// The tokens a new Server knows: RootToken may read and write every
// entry, ReaderToken only read. They are distinctive, so a test can look
// for them where they must never show.
const (
	RootToken   = "hvs.vaulttest-root-3f9a1c0d"
	ReaderToken = "hvs.vaulttest-reader-77b2e4"
)

// Access is what a token may do.
type Access int

// The kinds of access a token has.
const (
	// None: every request answers 403, as for an unknown token.
	None Access = iota
	// Read: GET only.
	Read
	// Write: GET and POST.
	Write
)

// entry is one KV entry's versions, oldest first; deleted marks its
// newest version deleted.
type entry struct {
	versions []map[string]any
	deleted  bool
}

// Server is the imitation of one Vault server's KV version 2 mount. Its
// methods change what it holds as an operator would, outside the API.
type Server struct {
	// URL is the server's address, as VaultConfig.Addr takes it.
	URL string

	srv        *httptest.Server
	mu         sync.Mutex
	entries    map[string]*entry
	tokens     map[string]Access
	namespaces []string
	reads      map[string]int
}

// New starts a Server holding no entries and knowing RootToken and
// ReaderToken; it stops when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{entries: map[string]*entry{}, reads: map[string]int{},
		tokens: map[string]Access{RootToken: Write, ReaderToken: Read}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Close stops the server: from then on it cannot be reached at all, as a
// Vault that is down.
func (s *Server) Close() { s.srv.Close() }

// SetToken gives token the access a (None takes it away: the token was
// revoked, or its policy no longer covers the mount).
func (s *Server) SetToken(token string, a Access) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = a
}

// Put writes data as a new version of the entry path, and answers the
// version: what `vault kv put` does.
func (s *Server) Put(path string, data map[string]any) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[path]
	if e == nil {
		e = &entry{}
		s.entries[path] = e
	}
	e.versions = append(e.versions, data)
	e.deleted = false
	return len(e.versions)
}

// Delete deletes the newest version of the entry path, which then reads
// as not found: what `vault kv delete` does.
func (s *Server) Delete(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[path]; e != nil {
		e.deleted = true
	}
}

// Reads answers how many GET requests reached the entry path, whatever
// they were answered.
func (s *Server) Reads(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[path]
}

// Namespaces answers the X-Vault-Namespace of every request that sent
// one, in order.
func (s *Server) Namespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.namespaces...)
}

func answer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func refuse(w http.ResponseWriter, status int, msgs ...string) {
	answer(w, status, map[string]any{"errors": append([]string{}, msgs...)})
}

// metadata is a version's metadata as KV version 2 answers it.
func metadata(version int, deleted bool) map[string]any {
	m := map[string]any{"created_time": "2026-01-02T03:04:05.123456Z", "custom_metadata": nil,
		"deletion_time": "", "destroyed": false, "version": version}
	if deleted {
		m["deletion_time"] = "2026-01-02T04:00:00.000000Z"
	}
	return m
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns := r.Header.Get("X-Vault-Namespace"); ns != "" {
		s.namespaces = append(s.namespaces, ns)
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/v1/"+Mount+"/data/")
	if r.Method == http.MethodGet && ok {
		s.reads[path]++
	}
	access := s.tokens[r.Header.Get("X-Vault-Token")]
	if access == None || access == Read && r.Method != http.MethodGet {
		refuse(w, http.StatusForbidden, "permission denied")
		return
	}
	if !ok || path == "" {
		refuse(w, http.StatusNotFound, "no handler for route \""+r.URL.Path+"\". route entry not found.")
		return
	}
	e := s.entries[path]
	switch r.Method {
	case http.MethodGet:
		if e == nil {
			refuse(w, http.StatusNotFound)
			return
		}
		n := len(e.versions)
		if e.deleted {
			answer(w, http.StatusNotFound, map[string]any{"data": map[string]any{"data": nil, "metadata": metadata(n, true)}})
			return
		}
		answer(w, http.StatusOK, map[string]any{"request_id": "r1", "lease_id": "", "renewable": false, "lease_duration": 0,
			"data": map[string]any{"data": e.versions[n-1], "metadata": metadata(n, false)}, "wrap_info": nil, "warnings": nil, "auth": nil})
	case http.MethodPost, http.MethodPut:
		var body struct {
			Options map[string]any `json:"options"`
			Data    map[string]any `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Data == nil {
			refuse(w, http.StatusBadRequest, "no data provided")
			return
		}
		current := 0
		if e != nil {
			current = len(e.versions)
		}
		if cas, ok := body.Options["cas"].(float64); ok && int(cas) != current {
			refuse(w, http.StatusBadRequest, "check-and-set parameter did not match the current version")
			return
		}
		if e == nil {
			e = &entry{}
			s.entries[path] = e
		}
		e.versions = append(e.versions, body.Data)
		e.deleted = false
		answer(w, http.StatusOK, map[string]any{"request_id": "r2", "data": metadata(len(e.versions), false)})
	default:
		refuse(w, http.StatusMethodNotAllowed, "unsupported operation")
	}
}
