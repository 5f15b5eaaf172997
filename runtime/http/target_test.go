package httpruntime_test

import (
	"testing"

	"github.com/toolplane/toolplane"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
)

func TestTargetNamesTheDownstream(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"https://api.example.com/orders/{id}": "host:api.example.com",
		"http://127.0.0.1:8080/x":             "host:127.0.0.1:8080",
		"/orders/{id}":                        "connection:crm",
	} {
		d := &toolplane.Definition{Name: "crm.get", Version: "1.0.0", Connection: "crm",
			Binding: toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "GET", URL: url}}}
		if got := httpruntime.Target(d); got != want {
			t.Errorf("%s: target %q, want %q", url, got, want)
		}
	}
}
