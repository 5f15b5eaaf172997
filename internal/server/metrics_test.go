package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMetricsTokenGuardsMetrics(t *testing.T) {
	t.Parallel()
	h := bearerOnly("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("metrics")) }))
	tests := []struct {
		header string
		want   int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer s3cret", http.StatusOK},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%q: %d, want %d", tt.header, rec.Code, tt.want)
		}
	}
	// Without a token the handler is open.
	rec := httptest.NewRecorder()
	bearerOnly("", h).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("the open wrapper changed the inner handler's answer: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	bearerOnly("", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("an open /metrics refused a scraper: %d", rec.Code)
	}
}

// The metrics token's refusal is JSON too, with a Bearer challenge.
func TestMetricsRefusalIsJSON(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(bearerOnly("s3cret", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("metrics")) })))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Error map[string]any `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") || json.Unmarshal(raw, &env) != nil || env.Error["code"] != "unauthenticated" {
		t.Errorf("%d %v %s; want 401, a Bearer challenge and the error envelope", resp.StatusCode, resp.Header, raw)
	}
}
