package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/toolfile"
	"github.com/toolplane/toolplane/upstream"
)

// loadTools reads every definition file in dir.
func loadTools(dir string, stderr io.Writer) ([]toolplane.Definition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tools directory: %w", err)
	}
	var defs []toolplane.Definition
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		d, notes, err := toolfile.ReadFile(filepath.Join(dir, e.Name()))
		for _, n := range notes {
			fmt.Fprintf(stderr, "%s: note: %s: %s\n", e.Name(), n.Field, n.Message)
		}
		if err != nil {
			return nil, err
		}
		defs = append(defs, d)
	}
	return defs, nil
}

// serveBindings resolves definitions against the handlers compiled into
// this binary, the configured upstream servers and the policy facts the
// node resolves (the built-in ones and the handlers' own).
type serveBindings struct {
	*handler.Registry
	upstreams *upstream.Set
	facts     policy.Facts
}

func (b serveBindings) Connection(id string) bool     { return b.upstreams.Connection(id) }
func (b serveBindings) FactResolver(name string) bool { return b.facts.FactResolver(name) }

// policyFacts answers the facts this node resolves: the built-in ones
// (package facts) and those the compiled-in handlers registered. A
// handler's fact may not take a built-in's name: a rule reading it must
// know which it reads.
func policyFacts(builtin policy.Facts, handlers *handler.Registry) (policy.Facts, error) {
	out := make(policy.Facts, len(builtin))
	for name, r := range builtin {
		out[name] = r
	}
	for name, r := range handlers.Facts() {
		if _, taken := out[name]; taken {
			return nil, fmt.Errorf("policy fact %q is built in; a handler's resolver needs another name", name)
		}
		out[name] = r
	}
	return out, nil
}

// bearerOnly requires Authorization: Bearer token on next, compared in
// constant time; an empty token leaves next open.
func bearerOnly(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			httperr.Send(w, r, httperr.Unauthenticated, "metrics need the metrics token", "")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// endOnShutdown serves next, ending its GET requests (an MCP client's
// stream of notifications, which no call answers on) when streams ends:
// http.Server.Shutdown waits for every request, and such a stream lasts
// as long as its client stays. Requests of other methods (calls, whose
// answers may stream) are left to finish.
func endOnShutdown(streams context.Context, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(streams, cancel)
		defer stop()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
