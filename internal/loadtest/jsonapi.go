package loadtest

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
)

// The JSON API the http targets measure: toolplane's http runtime in front
// of a small API, beside the API called directly and through a bare
// reverse proxy.

// itemPath is where the JSON API answers an item: GET reads it, POST
// writes it (and answers it).
const itemPath = "/items/"

// ItemID is the item every http target asks for.
const ItemID = "it_000001"

// APITokenEnv carries the JSON API's bearer token to its helper process,
// so it appears in no process's arguments.
const APITokenEnv = "TOOLPLANE_LOAD_API_TOKEN"

// item is the JSON API's answer: about 300 bytes of JSON, as a small API
// answers a lookup.
type item struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	SKU         string   `json:"sku"`
	PriceCents  int64    `json:"price_cents"`
	Currency    string   `json:"currency"`
	InStock     bool     `json:"in_stock"`
	Quantity    int      `json:"quantity"`
	Warehouse   string   `json:"warehouse"`
	Tags        []string `json:"tags"`
	UpdatedAt   string   `json:"updated_at"`
	Description string   `json:"description"`
}

func newItem(id string) item {
	return item{ID: id, Name: "Widget, blue, large", SKU: "WDG-BLU-L-0001", PriceCents: 1299, Currency: "EUR",
		InStock: true, Quantity: 42, Warehouse: "loopback-1", Tags: []string{"hardware", "blue", "large"},
		UpdatedAt:   "2026-01-01T00:00:00Z",
		Description: "A plain item record of about three hundred bytes, as a small JSON API answers."}
}

// APIHandler answers the JSON API: GET /items/{id} encodes the item, POST
// /items/{id} reads a JSON body of at most 64 KiB and answers the item.
// Every request must present token as a bearer token, as an API behind a
// connection does; each answer is encoded afresh, as a real handler's is.
func APIHandler(token string) http.Handler {
	want := []byte("Bearer " + token)
	answer := func(w http.ResponseWriter, id string) {
		b, err := json.Marshal(newItem(id))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Write(b)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+itemPath+"{id}", func(w http.ResponseWriter, r *http.Request) {
		answer(w, r.PathValue("id"))
	})
	mux.HandleFunc("POST "+itemPath+"{id}", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body); err != nil && !errors.Is(err, io.EOF) {
			http.Error(w, `{"message":"the body is not a JSON object"}`, http.StatusBadRequest)
			return
		}
		answer(w, r.PathValue("id"))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, `{"message":"a valid bearer token is required"}`, http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// API is the JSON API and a bare reverse proxy to it, on loopback.
type API struct {
	// URL is the API's base URL, ProxyURL the proxy's.
	URL, ProxyURL string
	stop          func() error
	// pid and proxyPID are the helper processes' ids; zero in this
	// process.
	pid, proxyPID int
}

// Close stops the servers (or their helper processes).
func (a *API) Close() error { return a.stop() }

// PIDs answers the processes a direct call runs in (the API's), or nil
// when it runs in this process.
func (a *API) PIDs() []int {
	if a.pid == 0 {
		return nil
	}
	return []int{a.pid}
}

// ProxyPIDs answers the processes a call through the proxy runs in, or
// nil when either runs in this process.
func (a *API) ProxyPIDs() []int {
	if a.pid == 0 || a.proxyPID == 0 {
		return nil
	}
	return []int{a.proxyPID, a.pid}
}

// StartAPI serves the JSON API on addr and a bare reverse proxy to it on
// another loopback port, in this process, until ctx ends or Close.
func StartAPI(ctx context.Context, addr, token string) (*API, error) {
	base, proxy, stop, err := serveWithProxy(ctx, addr, "api", APIHandler(token))
	if err != nil {
		return nil, err
	}
	return &API{URL: base.String(), ProxyURL: proxy, stop: stop}, nil
}

// apiLine is what ServeAPI prints once it serves.
var apiLine = regexp.MustCompile(`^api serving on (http://\S+)$`)

// ServeAPI serves the JSON API alone on addr until ctx ends, after
// printing where it serves to stdout: the body of the API's helper
// process. The token is $TOOLPLANE_LOAD_API_TOKEN.
func ServeAPI(ctx context.Context, addr string, stdout io.Writer) error {
	return ServeAPIWithHang(ctx, addr, "", stdout)
}

// apiHangLine is what ServeAPIWithHang prints once it serves both.
var apiHangLine = regexp.MustCompile(`^api serving on (http://\S+) and hanging on (http://\S+)$`)

// HangHandler accepts every request and never answers it, as a
// downstream stuck on a lock or a dead dependency does: it returns only
// when the caller gives up (or the server closes).
func HangHandler() http.Handler {
	return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
}

// ServeAPIWithHang is ServeAPI, and, when hangAddr is set, HangHandler on
// hangAddr as well, in the same process: a downstream of its own (another
// host:port, so another breaker and another target cap in toolplane)
// that hangs beside the healthy one.
func ServeAPIWithHang(ctx context.Context, addr, hangAddr string, stdout io.Writer) error {
	token := os.Getenv(APITokenEnv)
	if token == "" {
		return fmt.Errorf("api: $%s is not set", APITokenEnv)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: APIHandler(token), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	line := fmt.Sprintf("api serving on http://%s", ln.Addr())
	if hangAddr != "" {
		hln, err := net.Listen("tcp", hangAddr)
		if err != nil {
			return fmt.Errorf("api: listen on %s: %w", hangAddr, err)
		}
		hsrv := &http.Server{Handler: HangHandler(), ReadHeaderTimeout: 10 * time.Second}
		go hsrv.Serve(hln)
		defer hsrv.Close()
		line += fmt.Sprintf(" and hanging on http://%s", hln.Addr())
	}
	if _, err := fmt.Fprintln(stdout, line); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	<-ctx.Done()
	return nil
}

// StartAPIProcess runs the JSON API in a helper process of its own (name
// with apiArgs: toolplane-load's "api" subcommand, given token in its
// environment) and a bare reverse proxy to it in another (name with
// proxyArgs and "-to" the API's URL: the "proxy" subcommand), as toolplane
// is a process of its own in front of the API.
func StartAPIProcess(ctx context.Context, stderr io.Writer, token, name string, apiArgs, proxyArgs []string) (*API, error) {
	h, err := startHelper(ctx, stderr, apiLine, []string{APITokenEnv + "=" + token}, name, apiArgs...)
	if err != nil {
		return nil, fmt.Errorf("api process: %w", err)
	}
	p, err := startHelper(ctx, stderr, proxyLine, nil, name, append(proxyArgs, "-to", h.match[0])...)
	if err != nil {
		h.stop()
		return nil, fmt.Errorf("api proxy process: %w", err)
	}
	return &API{URL: h.match[0], ProxyURL: strings.TrimSuffix(p.match[0], "/"), pid: h.pid, proxyPID: p.pid,
		stop: func() error { return errors.Join(p.stop(), h.stop()) }}, nil
}
