package toolplane

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestStableCodes(t *testing.T) {
	t.Parallel()
	// The list models and agent runtimes branch on; changing it breaks them.
	want := "denied rejected invalid_input tool_unavailable tool_changed not_found invalid_output unavailable retryable_upstream conflict timeout uncertain batch_too_large budget_exhausted connection_required connection_expired connection_revoked connection_ambiguous internal_error deadline_exceeded max_hops_exceeded rate_limited"
	var got []string
	for _, c := range Codes {
		if !c.Valid() {
			t.Errorf("%s is listed but not valid", c)
		}
		got = append(got, string(c))
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("codes = %v", got)
	}
	if Code("parent_cancelled").Valid() || Code("").Valid() {
		t.Fatal("a code outside the list is valid")
	}
}

func TestCodeRetryable(t *testing.T) {
	t.Parallel()
	retryable := map[Code]bool{CodeInvalidInput: true, CodeRetryableUpstream: true, CodeUnavailable: true, CodeTimeout: true, CodeBatchTooLarge: true, CodeRateLimited: true}
	for _, c := range Codes {
		if c.Retryable() != retryable[c] {
			t.Errorf("%s: retryable = %v", c, c.Retryable())
		}
		if r := Fail(c, "m"); r.OK || r.Error.Code != c || r.Error.Retryable != retryable[c] {
			t.Errorf("Fail(%s) = %+v", c, r)
		}
	}
}

func TestInvalidLiftsFirstViolation(t *testing.T) {
	t.Parallel()
	vs := []Violation{
		{FieldPath: "/a", Constraint: "type", Message: "a must be a string (got integer 1)", SuggestedFix: "send a string"},
		{FieldPath: "/b", Constraint: "required", Message: "b is required but missing", SuggestedFix: `add "b"`},
	}
	r := Invalid(vs)
	e := r.Error
	if r.OK || e.Code != CodeInvalidInput || !e.Retryable || e.FieldPath != "/a" || e.Constraint != "type" || e.SuggestedFix != "send a string" {
		t.Fatalf("error = %+v", e)
	}
	if !strings.Contains(e.Message, "(got integer 1)") || !strings.Contains(e.Message, "1 more") || len(e.Violations) != 2 {
		t.Fatalf("message = %q", e.Message)
	}
}

func TestResultJSONNeverCarriesStop(t *testing.T) {
	t.Parallel()
	r := Fail(CodeBudgetExhausted, "the run's budget is spent")
	r.Stop = StopBudgetExhausted
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "stop") {
		t.Fatalf("stop rendered: %s", b)
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{`"3s"`, 3 * time.Second, true},
		{`"1m30s"`, 90 * time.Second, true},
		{`1500`, 1500 * time.Millisecond, true},
		{`"soon"`, 0, false},
		{`true`, 0, false},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		if (err == nil) != tt.ok || tt.ok && d.Std() != tt.want {
			t.Errorf("%s: %v %v", tt.in, d.Std(), err)
		}
	}
	b, _ := json.Marshal(Duration(1500 * time.Millisecond))
	if string(b) != `"1.5s"` {
		t.Errorf("marshal = %s", b)
	}
}

func TestUntrustedFollowsKindAndOpenWorld(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    Definition
		want bool
	}{
		{Definition{Kind: KindInternal}, false},
		{Definition{Kind: KindInternal, Annotations: Annotations{OpenWorld: true}}, true},
		{Definition{Kind: KindVendor}, true},
		{Definition{Kind: KindMCP}, true},
		// Answered by a remote server, whatever kind it claims.
		{Definition{Kind: KindInternal, Binding: Binding{Remote: &RemoteBinding{ConnectionID: "up", RemoteName: "lookup"}}}, true},
	}
	for _, tt := range tests {
		if tt.d.Untrusted() != tt.want {
			t.Errorf("%+v: untrusted = %v", tt.d, !tt.want)
		}
	}
}

func TestNewIDSortsByCreationAndIsUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	prev := ""
	for range 10_000 {
		id := NewID("aud_")
		if !strings.HasPrefix(id, "aud_") || seen[id] {
			t.Fatalf("id %q repeated or unprefixed", id)
		}
		seen[id] = true
		if id[:23] < prev {
			t.Fatalf("ids out of order: %s after %s", id, prev)
		}
		prev = id[:23]
	}
}

func TestAppendHexWritesAsFmtDoes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v     uint64
		width int
	}{
		{0, 13}, {1, 6}, {0xffffff, 6}, {0x1000000, 6}, {1796203862684263, 13}, {1<<64 - 1, 13}, {0xabc, 0},
	}
	for _, tt := range tests {
		want := fmt.Sprintf("%0*x", tt.width, tt.v)
		if got := string(appendHex([]byte("id_"), tt.v, tt.width)); got != "id_"+want {
			t.Errorf("appendHex(%#x, %d) = %q, want %q", tt.v, tt.width, got, "id_"+want)
		}
	}
	id := NewID("aud_")
	if len(id) != len("aud_")+13+6+16 || strings.Trim(id[len("aud_"):], "0123456789abcdef") != "" {
		t.Errorf("NewID = %q, want aud_ and 35 hex digits", id)
	}
}

func TestCostCeilingTakesTheLower(t *testing.T) {
	t.Parallel()
	tests := []struct{ asked, cap, want int64 }{
		{0, 0, 0}, {500, 0, 500}, {0, 300, 300}, {500, 300, 300}, {200, 300, 200}, {-5, 0, 0}, {-5, 300, 300},
	}
	for _, tt := range tests {
		if got := CostCeiling(tt.asked, tt.cap); got != tt.want {
			t.Errorf("CostCeiling(%d, %d) = %d, want %d", tt.asked, tt.cap, got, tt.want)
		}
	}
}

func TestPrincipalAllow(t *testing.T) {
	t.Parallel()
	var p Principal
	p.Allow("crm.lookup", "")
	p.Allow("payments.refund_order", "^2.1.0")
	if !p.Holds("crm.lookup") || !p.Holds("payments.refund_order") || p.Holds("crm.delete") {
		t.Errorf("holds %v", p.Tools)
	}
	if _, pinned := p.Pins["crm.lookup"]; pinned || p.Pins["payments.refund_order"] != "^2.1.0" {
		t.Errorf("pins %v", p.Pins)
	}
}

func TestHasRoleInAnyTeam(t *testing.T) {
	t.Parallel()
	person := func(roles ...string) *Credential { return &Credential{Kind: CredentialPerson, Roles: roles} }
	tests := []struct {
		name string
		c    *Credential
		ask  []string
		want bool
	}{
		{"nobody", nil, []string{RoleToolOwner}, false},
		{"owner of a team", person("tool_owner:team-a"), []string{RoleToolOwner}, true},
		{"publisher asked for owner", person("tool_publisher:team-a"), []string{RoleToolOwner}, false},
		{"publisher asked for either", person("tool_publisher:team-a"), []string{RoleToolOwner, RoleToolPublisher}, true},
		{"a role without a team", person("tool_owner"), []string{RoleToolOwner}, false},
		{"platform admin", person(RolePlatformAdmin), []string{RoleToolOwner}, true},
		{"an agent", &Credential{Kind: CredentialAgent, Roles: []string{"tool_owner:team-a"}}, []string{RoleToolOwner}, false},
	}
	for _, tt := range tests {
		if got := tt.c.HasRoleInAnyTeam(tt.ask...); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		NewID("aud_")
	}
}

// Kind names the one part of a binding that is set, and Platform says
// whether the platform runs it itself.
func TestBindingKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		b        Binding
		kind     string
		platform bool
	}{
		{Binding{}, "", false},
		{Binding{Handler: &HandlerBinding{Key: "k"}}, BindingHandler, false},
		{Binding{Remote: &RemoteBinding{}}, BindingRemote, false},
		{Binding{HTTP: &HTTPBinding{}}, BindingHTTP, true},
		{Binding{SQL: &SQLBinding{}}, BindingSQL, true},
	}
	for _, tt := range tests {
		if got := tt.b.Kind(); got != tt.kind {
			t.Errorf("Kind(%+v) = %q, want %q", tt.b, got, tt.kind)
		}
		if got := tt.b.Platform(); got != tt.platform {
			t.Errorf("Platform(%+v) = %v, want %v", tt.b, got, tt.platform)
		}
	}
}

// A node is dead once retired, or at the moment its silence reaches the
// timeout (not a tick later); without a timeout only retirement tells.
func TestNodeDead(t *testing.T) {
	t.Parallel()
	beat := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const after = 30 * time.Second
	tests := []struct {
		name  string
		beat  time.Time
		now   time.Time
		after time.Duration
		dead  bool
	}{
		{"just beat", beat, beat, after, false},
		{"a tick before the timeout", beat, beat.Add(after - time.Microsecond), after, false},
		{"at the timeout", beat, beat.Add(after), after, true},
		{"past the timeout", beat, beat.Add(time.Hour), after, true},
		{"retired", time.Unix(0, 0), beat, after, true},
		{"retired, no timeout", time.Unix(0, 0), beat, 0, true},
		{"silent, no timeout", beat, beat.Add(time.Hour), 0, false},
	}
	for _, tt := range tests {
		n := &Node{ID: "n@1", Name: "n", HeartbeatAt: tt.beat}
		if got := n.Dead(tt.now, tt.after); got != tt.dead {
			t.Errorf("%s: Dead = %v, want %v", tt.name, got, tt.dead)
		}
	}
}

func TestFailAfterBoundsItsWait(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		wait time.Duration
		want int
	}{
		{0, 1},
		{time.Millisecond, 1},
		{1500 * time.Millisecond, 2},
		{30 * time.Second, 30},
		{999999999 * time.Second, int(MaxRetryAfter / time.Second)},
		{time.Duration(1<<63 - 1), int(MaxRetryAfter / time.Second)},
	} {
		r := FailAfter(CodeUnavailable, "m", tt.wait)
		if r.Error.RetryAfter != tt.want || r.Error.Code != CodeUnavailable || !r.Error.Retryable {
			t.Errorf("FailAfter(%v) = %+v, want retry_after_seconds %d", tt.wait, r.Error, tt.want)
		}
	}
}

// An invocation stored before hops were recorded (an approval or an
// asynchronous call filed before) decodes with as many hops as a call may
// have, for the invoker to cap; one stored since keeps its own, zero
// included.
func TestStoredInvocationHops(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw  string
		want int
	}{
		{`{"OrganizationID":"org-1","RunID":"run-1"}`, math.MaxInt32},
		{`{"OrganizationID":"org-1","Hops":0}`, 0},
		{`{"OrganizationID":"org-1","Hops":3}`, 3},
		{`{"OrganizationID":"org-1","Hops":-1}`, -1},
	} {
		var inv Invocation
		if err := json.Unmarshal([]byte(tt.raw), &inv); err != nil {
			t.Fatal(err)
		}
		if inv.Hops != tt.want || inv.OrganizationID != "org-1" {
			t.Errorf("%s decodes to hops %d (org %q), want %d", tt.raw, inv.Hops, inv.OrganizationID, tt.want)
		}
		back, err := json.Marshal(inv)
		if err != nil {
			t.Fatal(err)
		}
		var again Invocation
		if err := json.Unmarshal(back, &again); err != nil || again.Hops != inv.Hops {
			t.Errorf("%s does not survive a round trip: hops %d, %v", tt.raw, again.Hops, err)
		}
	}
}
