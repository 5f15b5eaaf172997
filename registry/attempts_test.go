package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

func dur(d time.Duration) toolplane.Duration { return toolplane.Duration(d) }

// TestFullVendorRetryBudgetFitsInsideTheDeclaredToolTimeout: publishing
// refuses a tool whose attempts, each at its attempt timeout, with every
// pause at its ceiling, cannot finish within its timeout, and names the
// arithmetic; one that fits is accepted.
func TestFullVendorRetryBudgetFitsInsideTheDeclaredToolTimeout(t *testing.T) {
	t.Parallel()
	read := func(timeout time.Duration, e toolplane.Execution) toolplane.Definition {
		d := readDef()
		d.Retry, d.Timeout, d.Execution = toolplane.RetrySafe, dur(timeout), &e
		return d
	}
	for _, tt := range []struct {
		name string
		def  toolplane.Definition
		want string // "" when it fits
	}{
		{"three attempts of 4s with their pauses past 10s",
			read(10*time.Second, toolplane.Execution{MaxAttempts: 3, AttemptTimeout: dur(4 * time.Second), Backoff: dur(200 * time.Millisecond)}),
			"3 attempts × 4s + pauses up to 200ms + 400ms = 12.6s, more than the timeout of 10s"},
		{"three attempts of 3s with their pauses within 10s",
			read(10*time.Second, toolplane.Execution{MaxAttempts: 3, AttemptTimeout: dur(3 * time.Second), Backoff: dur(200 * time.Millisecond)}), ""},
		{"the default three attempts count",
			read(5*time.Second, toolplane.Execution{AttemptTimeout: dur(2 * time.Second)}),
			"3 attempts × 2s + pauses up to 100ms + 200ms = 6.3s, more than the timeout of 5s"},
		{"pauses capped by max_backoff",
			read(10*time.Second, toolplane.Execution{MaxAttempts: 4, AttemptTimeout: dur(2 * time.Second), Backoff: dur(time.Second), MaxBackoff: dur(1500 * time.Millisecond)}),
			"4 attempts × 2s + pauses up to 1s + 1.5s + 1.5s = 12s, more than the timeout of 10s"},
		{"one attempt longer than the timeout",
			read(time.Second, toolplane.Execution{MaxAttempts: 1, AttemptTimeout: dur(2 * time.Second)}),
			"1 attempt × 2s = 2s, more than the timeout of 1s"},
		{"the default timeout counts",
			read(0, toolplane.Execution{MaxAttempts: 2, AttemptTimeout: dur(20 * time.Second)}),
			"more than the timeout of 30s"},
		{"a write attempted once is held to one attempt's time",
			func() toolplane.Definition {
				d := base()
				d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://crm.example/x"}}
				d.Connection, d.Timeout = "crm", dur(5*time.Second)
				d.Execution = &toolplane.Execution{AttemptTimeout: dur(4 * time.Second)}
				return d
			}(), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps := problems(t, []toolplane.Definition{tt.def}, Options{Bindings: deployment})
			if tt.want == "" {
				if len(ps) > 0 {
					t.Fatalf("unexpected problems: %v", ps)
				}
				return
			}
			for _, p := range ps {
				if p.Field == "execution" && strings.Contains(p.Message, tt.want) && p.Fix != "" {
					return
				}
			}
			t.Fatalf("no problem naming %q; got %v", tt.want, ps)
		})
	}
}

// The execution block's attempts are refused when they make no sense, or
// ask a second attempt of a tool that is never attempted twice.
func TestExecutionAttemptsChecks(t *testing.T) {
	t.Parallel()
	with := func(d toolplane.Definition, e toolplane.Execution) toolplane.Definition {
		d.Execution = &e
		return d
	}
	httpWrite := func(header string) toolplane.Definition {
		d := base()
		d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://crm.example/x", IdempotencyHeader: header}}
		d.Connection = "crm"
		return d
	}
	sqlWrite := base()
	sqlWrite.Binding = toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: "UPDATE companies SET name = :filter WHERE id = :company_id"}}
	sqlWrite.Connection = "warehouse"
	remoteWrite := base()
	remoteWrite.Name, remoteWrite.Kind = "mcp.gh.x", toolplane.KindMCP
	remoteWrite.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "conn-1", RemoteName: "x"}}
	safeRead := readDef()
	safeRead.Retry = toolplane.RetrySafe
	for _, tt := range []struct {
		name  string
		def   toolplane.Definition
		field string // "" when accepted
	}{
		{"negative attempts", with(safeRead, toolplane.Execution{MaxAttempts: -1}), "execution.max_attempts"},
		{"negative in-flight cap", with(safeRead, toolplane.Execution{MaxInFlight: -1}), "execution.max_in_flight"},
		{"negative rate", with(safeRead, toolplane.Execution{RatePerMinute: -5}), "execution.rate_per_minute"},
		{"unknown priority", with(safeRead, toolplane.Execution{Priority: "urgent"}), "execution.priority"},
		{"traffic fields", with(safeRead, toolplane.Execution{MaxInFlight: 5, RatePerMinute: 60, Priority: toolplane.PriorityCritical}), ""},
		{"attempts past the limit", with(safeRead, toolplane.Execution{MaxAttempts: MaxAttempts + 1}), "execution.max_attempts"},
		{"negative attempt timeout", with(safeRead, toolplane.Execution{AttemptTimeout: dur(-time.Second)}), "execution.attempt_timeout"},
		{"negative backoff", with(safeRead, toolplane.Execution{Backoff: dur(-time.Millisecond)}), "execution.backoff"},
		{"negative max backoff", with(safeRead, toolplane.Execution{MaxBackoff: dur(-time.Millisecond)}), "execution.max_backoff"},
		{"max backoff below backoff", with(safeRead, toolplane.Execution{Backoff: dur(time.Second), MaxBackoff: dur(time.Millisecond)}), "execution.max_backoff"},
		{"attempts on a read whose retry is none", with(readDef(), toolplane.Execution{MaxAttempts: 3}), "execution.max_attempts"},
		{"attempts on a safe read", with(safeRead, toolplane.Execution{MaxAttempts: 5}), ""},
		{"attempts on an http write without a key", with(httpWrite(""), toolplane.Execution{MaxAttempts: 3}), "execution.max_attempts"},
		{"attempts on an http write with a key", with(httpWrite("Idempotency-Key"), toolplane.Execution{MaxAttempts: 3}), ""},
		{"attempts on a sql write", with(sqlWrite, toolplane.Execution{MaxAttempts: 3}), ""},
		{"attempts on a remote write", with(remoteWrite, toolplane.Execution{MaxAttempts: 2}), "execution.max_attempts"},
		{"attempts on a remote write its owner says is idempotent", func() toolplane.Definition {
			d := with(remoteWrite, toolplane.Execution{MaxAttempts: 2})
			d.Replay, d.Annotations.Idempotent = &toolplane.Replay{MaxAttempts: 3}, true
			return d
		}(), ""},
		{"attempts on a handler write", with(base(), toolplane.Execution{MaxAttempts: 3}), ""},
		{"one attempt on anything", with(readDef(), toolplane.Execution{MaxAttempts: 1}), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps := problems(t, []toolplane.Definition{tt.def}, Options{Bindings: deployment})
			if tt.field == "" {
				if len(ps) > 0 {
					t.Fatalf("unexpected problems: %v", ps)
				}
				return
			}
			for _, p := range ps {
				if p.Field == tt.field && p.Message != "" && p.Fix != "" {
					return
				}
			}
			t.Fatalf("no problem on field %q; got %v", tt.field, ps)
		})
	}
}
