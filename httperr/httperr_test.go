package httperr_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/httperr"
)

// JSON rewrites what http.Error writes, whether the handler read the body
// first or not, into the envelope, or a JSON-RPC error for the id of the
// one request the body holds; what is already JSON, and every success,
// passes through untouched.
func TestJSONRewritesPlainErrors(t *testing.T) {
	t.Parallel()
	refuse := func(read bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if read {
				_, _ = io.ReadAll(r.Body)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="t"`)
			http.Error(w, "go away", http.StatusUnauthorized)
		})
	}
	ownJSON := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"mine":true}`))
	})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("fine"))
	})
	tests := []struct {
		name    string
		h       http.Handler
		rpc     bool
		body    string
		status  int
		want    string // the body exactly, or
		id      string // the JSON-RPC id answered, or "" for the envelope
		envCode string
	}{
		{"numeric id, body unread", refuse(false), true, `{"jsonrpc":"2.0","method":"ping","id":7}`, 401, "", "7", ""},
		{"string id, body read", refuse(true), true, `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`, 401, "", `"a-1"`, ""},
		{"a notification", refuse(false), true, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 401, "", "", "unauthenticated"},
		{"a null id", refuse(false), true, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 401, "", "", "unauthenticated"},
		{"a batch", refuse(true), true, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 401, "", "", "unauthenticated"},
		{"not JSON", refuse(false), true, `hello`, 401, "", "", "unauthenticated"},
		{"past the bound", refuse(false), true, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 100) + `"}}`, 401, "", "", "unauthenticated"},
		{"the REST door: no JSON-RPC", refuse(false), false, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 401, "", "", "unauthenticated"},
		{"already JSON", ownJSON, true, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 429, `{"mine":true}`, "", ""},
		{"a success", ok, true, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 200, "fine", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(httperr.JSON(tt.h, tt.rpc, 80))
			defer srv.Close()
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.want != "" || tt.status < 400 {
				if string(raw) != tt.want {
					t.Errorf("body %q, want it untouched: %q", raw, tt.want)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" || resp.Header.Get("WWW-Authenticate") != `Bearer realm="t"` {
				t.Errorf("headers %v; want application/json and the handler's challenge", resp.Header)
			}
			var got struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    any            `json:"code"`
					Message string         `json:"message"`
					Data    map[string]any `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			if tt.id != "" {
				if got.JSONRPC != "2.0" || string(got.ID) != tt.id || got.Error.Code != float64(-32000) || got.Error.Message != "go away" || got.Error.Data["code"] != "unauthenticated" {
					t.Errorf("%s; want a JSON-RPC error -32000 for id %s", raw, tt.id)
				}
				return
			}
			if got.JSONRPC != "" || got.Error.Code != tt.envCode || got.Error.Message != "go away" {
				t.Errorf("%s; want the envelope with code %q", raw, tt.envCode)
			}
		})
	}
}
