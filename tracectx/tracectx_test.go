package tracectx_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/tracectx"
)

const (
	good  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	state = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
)

// A traceparent is taken from a header, a _meta or a stored pair; one
// that does not parse is ignored, and the context is left as it was.
func TestTakenOrIgnored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, parent string
		valid        bool
	}{
		{"valid", good, true},
		{"none", "", false},
		{"garbage", "not a traceparent", false},
		{"short trace id", "00-4bf92f3577b34da6-00f067aa0ba902b7-01", false},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"upper case", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tc.parent != "" {
				h.Set("Traceparent", tc.parent)
				h.Set("Tracestate", state)
			}
			bg := context.Background()
			for form, ctx := range map[string]context.Context{
				"header":  tracectx.FromHeader(bg, h),
				"meta":    tracectx.FromMeta(bg, map[string]any{"traceparent": tc.parent, "tracestate": state}),
				"strings": tracectx.FromStrings(bg, tc.parent, state),
			} {
				sc := trace.SpanContextFromContext(ctx)
				if sc.IsValid() != tc.valid {
					t.Fatalf("%s: valid = %v", form, sc.IsValid())
				}
				if !tc.valid {
					if ctx != bg {
						t.Errorf("%s: the context was replaced", form)
					}
					continue
				}
				if !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() {
					t.Errorf("%s: span context %v", form, sc)
				}
				if got, st := tracectx.Strings(ctx); got != good || st != state {
					t.Errorf("%s: written back as %q %q", form, got, st)
				}
				out := http.Header{}
				tracectx.ToHeader(ctx, out)
				if out.Get("Traceparent") != good || out.Get("Tracestate") != state {
					t.Errorf("%s: header %v", form, out)
				}
				if c := tracectx.SQLComment(ctx); c != "/*traceparent='"+good+"'*/" {
					t.Errorf("%s: comment %q", form, c)
				}
			}
		})
	}
}

// A _meta value that is not a string is ignored like a malformed one.
func TestMetaOfAnotherType(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	if ctx := tracectx.FromMeta(bg, map[string]any{"traceparent": 42}); ctx != bg {
		t.Error("a number was taken as a traceparent")
	}
}

// Nothing is written, and nothing allocated, for a context without a
// span context.
func TestNothingWithoutASpanContext(t *testing.T) {
	bg := context.Background()
	h := http.Header{}
	allocs := testing.AllocsPerRun(100, func() {
		tracectx.ToHeader(bg, h)
		_, _ = tracectx.Strings(bg)
		_ = tracectx.SQLComment(bg)
		_ = tracectx.FromHeader(bg, h)
		_ = tracectx.FromMeta(bg, nil)
	})
	if allocs != 0 || len(h) != 0 {
		t.Errorf("%v allocations, header %v", allocs, h)
	}
}
