package policytest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/policytest"
)

// recorder is a testing.TB that keeps what the guard reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(r)
}

// TestMapsEveryField checks the guard itself: a mapping that carries
// every field passes, one that drops a field is named, and an equality
// that never holds is refused rather than passing every field.
func TestMapsEveryField(t *testing.T) {
	t.Parallel()
	whole := func(r *policy.Request) ([]byte, error) { return json.Marshal(r) }
	noOwner := func(r *policy.Request) ([]byte, error) {
		c := *r
		c.Tool.Owner = ""
		return json.Marshal(&c)
	}
	never := func(a, b []byte) bool { return false }
	tests := []struct {
		name    string
		mapping func(*policy.Request) ([]byte, error)
		equal   func(a, b []byte) bool
		want    int // errors reported
		naming  string
	}{
		{"every field carried", whole, bytes.Equal, 0, ""},
		{"a field dropped", noOwner, bytes.Equal, 1, "Request.Tool.Owner does not reach"},
		{"an equality that never holds", whole, never, 1, "not deterministic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{TB: t}
			func() {
				defer func() {
					if p := recover(); p != nil && p != any(r) {
						panic(p)
					}
				}()
				policytest.MapsEveryField(r, tt.mapping, tt.equal)
			}()
			if len(r.errors) != tt.want || !strings.Contains(strings.Join(r.errors, "\n"), tt.naming) {
				t.Errorf("reported %q, want %d naming %q", r.errors, tt.want, tt.naming)
			}
		})
	}
}
