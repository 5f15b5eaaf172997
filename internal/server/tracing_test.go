package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The standard OpenTelemetry environment decides whether serve exports
// spans, and an exporter it asks for sends them to the collector it names
// (here a loopback server taking OTLP over HTTP).
func TestTracingFromTheEnvironment(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" &&
			strings.Contains(string(body), "tool probe") {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)
	recorder := sdktrace.NewTracerProvider()
	t.Cleanup(func() { recorder.Shutdown(context.Background()) })
	tests := []struct {
		name string
		cfg  Config
		env  map[string]string
		// want: "none", "given" (the Config's provider), "otlp", or
		// "error".
		want string
	}{
		{"nothing configured", Config{}, nil, "none"},
		{"the Config's provider", Config{TracerProvider: recorder}, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "given"},
		{"an endpoint", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}, "otlp"},
		{"a traces endpoint and otlp named", Config{}, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.URL + "/v1/traces"}, "otlp"},
		{"exporter none", Config{}, map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}, "none"},
		{"sdk disabled", Config{}, map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}, "none"},
		{"another exporter", Config{}, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "error"},
		{"grpc", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := func(k string) string { return tc.env[k] }
			tp, stop, _, err := tracing(context.Background(), tc.cfg, env)
			switch tc.want {
			case "error":
				if err == nil {
					t.Fatal("no error")
				}
				return
			case "none":
				if err != nil || tp != nil || stop != nil {
					t.Fatalf("tracing = %v, %v; want none", tp, err)
				}
				return
			case "given":
				if err != nil || tp != recorder || stop != nil {
					t.Fatalf("tracing = %v, %v; want the Config's", tp, err)
				}
				return
			}
			if err != nil || tp == nil || stop == nil {
				t.Fatalf("tracing = %v, %v; want an exporter", tp, err)
			}
			before := posts.Load()
			_, span := tp.Tracer("test").Start(context.Background(), "tool probe")
			span.End()
			stop()
			if posts.Load() == before {
				t.Fatal("the collector received no span")
			}
		})
	}
}
