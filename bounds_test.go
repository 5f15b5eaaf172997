package toolplane

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInvocationCheckBoundsEveryIdentifier(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name  string
		tool  string
		set   func(*Invocation)
		field string
	}{
		{"all within bounds", "crm.lookup", func(inv *Invocation) {
			inv.RunID, inv.IdempotencyKey, inv.StepPath = long(MaxRunLen), long(MaxRunLen), long(MaxRunLen)
			inv.UserID, inv.AuthorizedBy, inv.TenantID = long(MaxRefLen), long(MaxRefLen), long(MaxRefLen)
		}, ""},
		{"tool", long(MaxNameLen + 1), func(*Invocation) {}, "tool"},
		{"run_id", "t", func(inv *Invocation) { inv.RunID = long(100 << 10) }, "run_id"},
		{"root_run_id", "t", func(inv *Invocation) { inv.RootRunID = long(MaxRunLen + 1) }, "root_run_id"},
		{"idempotency_key", "t", func(inv *Invocation) { inv.IdempotencyKey = long(900 << 10) }, "idempotency_key"},
		{"step_path", "t", func(inv *Invocation) { inv.StepPath = long(MaxRunLen + 1) }, "step_path"},
		{"authorized_by", "t", func(inv *Invocation) { inv.AuthorizedBy = long(MaxRefLen + 1) }, "authorized_by"},
		{"on_behalf_of", "t", func(inv *Invocation) { inv.UserID = long(MaxRefLen + 1) }, "on_behalf_of"},
		{"tenant_id", "t", func(inv *Invocation) { inv.TenantID = long(MaxRefLen + 1) }, "tenant_id"},
		{"agent", "t", func(inv *Invocation) { inv.AgentID = long(MaxRefLen + 1) }, "agent"},
		{"organization", "t", func(inv *Invocation) { inv.OrganizationID = long(MaxRefLen + 1) }, "organization"},
		{"principal", "t", func(inv *Invocation) { inv.Principal.ID = long(MaxRefLen + 1) }, "principal"},
		{"version range of the tool called", "t", func(inv *Invocation) { inv.Principal.Pins = map[string]string{"t": long(MaxRefLen + 1)} }, "version range"},
		{"another tool's range is not this call's", "t", func(inv *Invocation) { inv.Principal.Pins = map[string]string{"u": long(MaxRefLen + 1)} }, ""},
		{"a contract's tool", "t", func(inv *Invocation) { inv.Contracts = map[string]string{long(MaxNameLen + 1): "h"} }, "contracts"},
		{"a contract's hash", "t", func(inv *Invocation) { inv.Contracts = map[string]string{"t": long(MaxRefLen + 1)} }, "contracts"},
	}
	for _, tt := range tests {
		inv := &Invocation{OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1", StepPath: "agent"}
		tt.set(inv)
		err := inv.Check(tt.tool)
		var tooLong *TooLongError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.field != "" && (!errors.As(err, &tooLong) || tooLong.Field != tt.field):
			t.Errorf("%s: %v, want a TooLongError of %s", tt.name, err, tt.field)
		case tt.field != "" && len(err.Error()) > 200:
			t.Errorf("%s: the refusal quotes what it refuses: %d bytes", tt.name, len(err.Error()))
		}
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 63) + "é" + "tail"
	for _, c := range []struct{ name, in, want string }{
		{"short", "demo.refund", "demo.refund"},
		{"exactly the bound", strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{"cut before a character that straddles the bound", long, strings.Repeat("a", 63) + "…"},
		{"invalid bytes dropped", "a\xffb", "ab"},
		{"invalid bytes in a long one", "\xff" + strings.Repeat("b", 80), strings.Repeat("b", 63) + "…"},
	} {
		if got := Clip(c.in); got != c.want || !utf8.ValidString(got) {
			t.Errorf("%s: Clip(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}
