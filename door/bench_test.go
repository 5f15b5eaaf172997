package door_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/toolplane/toolplane"
)

// BenchmarkAuthenticate is what every call's key costs the door once the
// key cache holds it: the gate, the cache's answer and the touch that is
// not due.
func BenchmarkAuthenticate(b *testing.B) {
	f := newFixture(b, false)
	key := f.mint(b, toolplane.CredentialAgent, "agent-1", nil, []string{"crm.lookup"}, nil)
	authorization, h := "Bearer "+key, http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.door.Authenticate(context.Background(), authorization, "127.0.0.1", h); err != nil {
			b.Fatal(err)
		}
	}
}
