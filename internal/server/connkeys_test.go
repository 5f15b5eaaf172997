package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	httpruntime "github.com/toolplane/toolplane/runtime/http"
)

// TestClientKeyCoversTheRules proves that two connections share an egress
// client only when their rules and key header are the same: rule sets
// that differ only in where a text sits, or how texts are split, get
// keys of their own. It fails when EgressRules gains a field the key
// does not read.
func TestClientKeyCoversTheRules(t *testing.T) {
	t.Parallel()
	if n := reflect.TypeFor[toolplane.EgressRules]().NumField(); n != 2 {
		t.Fatalf("EgressRules has %d fields; clientKey reads 2: add the new one to it", n)
	}
	sets := []struct {
		name   string
		rules  toolplane.EgressRules
		header string
	}{
		{"nothing", toolplane.EgressRules{}, ""},
		{"one host", toolplane.EgressRules{Hosts: []string{"api.example"}}, ""},
		{"the host as a CIDR", toolplane.EgressRules{AllowCIDRs: []string{"api.example"}}, ""},
		{"the host as the header", toolplane.EgressRules{}, "api.example"},
		{"two hosts", toolplane.EgressRules{Hosts: []string{"a", "b"}}, ""},
		{"the two joined", toolplane.EgressRules{Hosts: []string{"ab"}}, ""},
		{"split elsewhere", toolplane.EgressRules{Hosts: []string{"a"}, AllowCIDRs: []string{"b"}}, ""},
		{"a host holding the separators", toolplane.EgressRules{Hosts: []string{"1:a"}}, ""},
		{"host and header", toolplane.EgressRules{Hosts: []string{"api.example"}}, "X-Api-Key"},
		{"host, CIDR and header", toolplane.EgressRules{Hosts: []string{"api.example"}, AllowCIDRs: []string{"127.0.0.1/32"}}, "X-Api-Key"},
	}
	seen := map[string]string{}
	for _, s := range sets {
		k := string(clientKey(nil, s.rules, s.header))
		if other, ok := seen[k]; ok {
			t.Errorf("%q and %q share the key %q", s.name, other, k)
		}
		seen[k] = s.name
		// The same rules in other slices give the same key.
		again := toolplane.EgressRules{Hosts: append([]string(nil), s.rules.Hosts...), AllowCIDRs: append([]string(nil), s.rules.AllowCIDRs...)}
		if k2 := string(clientKey(nil, again, s.header)); k2 != k {
			t.Errorf("%q: key %q, then %q for a copy", s.name, k, k2)
		}
	}
	clients := &egressClients{}
	a, err := clients.client(sets[1].rules, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := clients.client(sets[1].rules, "X-Api-Key")
	if err != nil {
		t.Fatal(err)
	}
	again, err := clients.client(toolplane.EgressRules{Hosts: []string{"api.example"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a != again {
		t.Errorf("clients: host %p, with a key header %p, host again %p; want the host's shared and the header's its own", a, b, again)
	}
}

// TestBindingFollowsTheSpec proves that a tool's binding is built once and
// used for every call of it, and that a definition of the same name,
// version and schema hash whose request differs gets a binding of its own.
func TestBindingFollowsTheSpec(t *testing.T) {
	t.Parallel()
	r, err := newRuntimes(httpruntime.New(httpruntime.Config{Client: func(*toolplane.Released) (*http.Client, error) { return http.DefaultClient, nil }}).Contract())
	if err != nil {
		t.Fatal(err)
	}
	def := func(url string) *toolplane.Definition {
		return &toolplane.Definition{
			Name: "billing.item", Version: "1.0.0", SchemaHash: "sha256:same", Description: "An item.",
			InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
			Kind: toolplane.KindInternal, Effect: toolplane.EffectRead, Connection: "billing", Timeout: toolplane.Duration(time.Second),
			Binding: toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: http.MethodGet, URL: url}},
		}
	}
	one := def("https://api.example/items")
	b1, err := r.Binding(one)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := r.Binding(one); err != nil || b != b1 {
		t.Fatalf("the same definition again: %p, %v; want %p", b, err, b1)
	}
	if b, err := r.Binding(def("https://api.example/items")); err != nil || b != b1 {
		t.Errorf("an equal definition built afresh: %p, %v; want %p", b, err, b1)
	}
	other, err := r.Binding(def("https://other.example/items"))
	if err != nil {
		t.Fatal(err)
	}
	if other == b1 {
		t.Errorf("a definition sending elsewhere got the binding of the first")
	}
}
