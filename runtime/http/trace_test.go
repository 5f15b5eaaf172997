package httpruntime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/tracectx"
)

// A request carries the attempt's trace context (its traceparent), over
// a traceparent the binding's headers would set from an argument, and
// none when the call has no trace context.
func TestRequestCarriesTheTraceContext(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	b := bind(t, httpDef("billing.item", toolplane.EffectRead, toolplane.HTTPBinding{Method: http.MethodGet, URL: srv.URL + "/x",
		Headers: map[string]string{"Traceparent": "{trace}"}}))
	tests := []struct {
		name      string
		ctx       context.Context
		arg, want string
	}{
		{"traced", tracectx.FromStrings(context.Background(), parent, ""), "00-11111111111111111111111111111111-2222222222222222-01", parent},
		{"untraced", context.Background(), "", ""},
	}
	for _, tc := range tests {
		args := map[string]any{}
		if tc.arg != "" {
			args["trace"] = tc.arg
		}
		if _, err := b.Invoke(tc.ctx, handler.Call{Released: connection()}, args); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if h := <-got; h != tc.want {
			t.Errorf("%s: traceparent %q, want %q", tc.name, h, tc.want)
		}
	}
}
