package approval_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/internal/testclock"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// newClock answers the tests' clock, standing at a fixed instant with a
// sub-second part, so a time stored and read back is seen to keep it.
func newClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 5, 4, 16, 30, 0, 123456000, time.UTC))
}

const ttl = time.Hour

// people are the credentials the tests answer approvals with: alice and
// bob are approvers of org-1 (and "" one with no name), mallory an approver
// of org-2 only, eve a person of org-1 without the role.
var people = map[string]*toolplane.Credential{
	"alice":   {OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}},
	"bob":     {OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "bob", Roles: []string{toolplane.RoleApprover}},
	"":        {OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "", Roles: []string{toolplane.RoleApprover}},
	"mallory": {OrganizationID: "org-2", Kind: toolplane.CredentialPerson, Subject: "mallory", Roles: []string{toolplane.RoleApprover}},
	"eve":     {OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "eve", Roles: []string{toolplane.RoleAuditor}},
}

// as answers the credential of the person named in people.
func as(name string) *toolplane.Credential {
	c, ok := people[name]
	if !ok {
		panic("no test person " + name)
	}
	return c
}

type fixture struct {
	store *sqlite.Store
	clock *testclock.Clock
	svc   *approval.Service
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := sqlitetest.New(t)
	c := newClock()
	return &fixture{store: s, clock: c, svc: approval.New(approval.Config{Store: s, Now: c.Now, TTL: ttl})}
}

const sendArgs = `{"to":"jo@acme.test","body":"The refund is on its way."}`

func hashOf(t *testing.T, args string) string {
	t.Helper()
	h, err := canonical.HashJSON([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// proposal answers an unfiled approval of email.send with sendArgs.
func proposal(t *testing.T) *toolplane.Approval {
	t.Helper()
	return &toolplane.Approval{
		OrganizationID: "org-1", RunID: "run-1", StepPath: "agent", Tool: "email.send", ToolVersion: "1.0.0",
		Key: "key-1", ArgumentsHash: hashOf(t, sendArgs), Arguments: []byte(sendArgs),
		Invocation: []byte(`{"OrganizationID":"org-1"}`), PrincipalID: "agent-1", Preview: "Send jo a note",
	}
}

func (f *fixture) file(t *testing.T, a *toolplane.Approval) *toolplane.Approval {
	t.Helper()
	existing, err := f.svc.File(context.Background(), a)
	if err != nil || existing {
		t.Fatalf("File = existing %v, %v; want a new approval", existing, err)
	}
	return a
}

func (f *fixture) get(t *testing.T, id string) *toolplane.Approval {
	t.Helper()
	a, err := f.svc.Find(context.Background(), "org-1", id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return a
}

func TestFileFillsIDStatusDefaultAndExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ttl  time.Duration
		want time.Duration
	}{
		{"configured ttl", ttl, ttl},
		{"zero ttl is the default", 0, approval.DefaultTTL},
		{"negative ttl is the default", -time.Minute, approval.DefaultTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := sqlitetest.New(t)
			c := newClock()
			svc := approval.New(approval.Config{Store: s, Now: c.Now, TTL: tt.ttl})
			a := proposal(t)
			a.ID, a.Status, a.DefaultOnTimeout = "caller-id", toolplane.ApprovalApproved, "allow"
			if existing, err := svc.File(context.Background(), a); err != nil || existing {
				t.Fatal(existing, err)
			}
			hexPart, ok := strings.CutPrefix(a.ID, "apr_")
			if !ok || hexPart == "" || strings.Trim(hexPart, "0123456789abcdef") != "" {
				t.Fatalf("ID = %q, want apr_ and hex digits", a.ID)
			}
			if a.Status != toolplane.ApprovalPending || a.DefaultOnTimeout != approval.DenyOnTimeout || approval.DenyOnTimeout != "deny" {
				t.Fatalf("status %q, default %q", a.Status, a.DefaultOnTimeout)
			}
			if !a.CreatedAt.Equal(c.Now()) || !a.ExpiresAt.Equal(c.Now().Add(tt.want)) {
				t.Fatalf("created %v, expires %v; now %v, ttl %v", a.CreatedAt, a.ExpiresAt, c.Now(), tt.want)
			}
			got, err := svc.Find(context.Background(), "org-1", a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, a) {
				t.Fatalf("stored %+v\nfiled  %+v", got, a)
			}
			// Another call's filing is another approval.
			b := proposal(t)
			b.Key = "key-2"
			if existing, err := svc.File(context.Background(), b); err != nil || existing {
				t.Fatal(existing, err)
			}
			if b.ID == a.ID {
				t.Fatalf("two filings share the ID %s", a.ID)
			}
			// The same call filed again is the approval it has.
			same := proposal(t)
			same.RunID = "run-2"
			if existing, err := svc.File(context.Background(), same); err != nil || !existing || !reflect.DeepEqual(same, got) {
				t.Fatalf("filing the same call again = existing %v, %v, %+v; want %s", existing, err, same, a.ID)
			}
			pending, _, err := svc.List(context.Background(), toolplane.ApprovalPending, "", 10, as("alice"))
			if err != nil || len(pending) != 2 {
				t.Fatalf("List pending = %d approvals, %v; want 2", len(pending), err)
			}
		})
	}
}

// TestCoversOnlyTheSameOrgToolHashAndKey: the key names the call (a
// derived one holds its run and step; a caller's own names the call in any
// run), so the run is not compared.
func TestCoversOnlyTheSameOrgToolHashAndKey(t *testing.T) {
	t.Parallel()
	a := &toolplane.Approval{OrganizationID: "org-1", RunID: "run-1", Tool: "email.send", ArgumentsHash: "h1", Key: "key-1"}
	tests := []struct {
		name                  string
		org, tool, hashV, key string
		want                  bool
	}{
		{"the same call", "org-1", "email.send", "h1", "key-1", true},
		{"another organization", "org-2", "email.send", "h1", "key-1", false},
		{"another tool", "org-1", "email.draft", "h1", "key-1", false},
		{"other arguments", "org-1", "email.send", "h2", "key-1", false},
		{"empty hash", "org-1", "email.send", "", "key-1", false},
		{"another key (another run, step or caller key)", "org-1", "email.send", "h1", "key-2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := approval.Covers(a, tt.org, tt.tool, tt.hashV, tt.key); got != tt.want {
				t.Fatalf("Covers(%s, %s, %s, %s) = %v, want %v", tt.org, tt.tool, tt.hashV, tt.key, got, tt.want)
			}
		})
	}
}

// TestMayDecide is the rule of who answers an approval, the one every door
// and the background jobs use: a person's key with the approver role, of
// the approval's organization, a member of its group when it has one, and
// neither the principal that asked nor the person it asked for.
func TestMayDecide(t *testing.T) {
	t.Parallel()
	inv := func(user string) []byte { return []byte(`{"OrganizationID":"org-1","UserID":"` + user + `"}`) }
	a := &toolplane.Approval{OrganizationID: "org-1", PrincipalID: "agent-1", Invocation: inv("")}
	self := &toolplane.Approval{OrganizationID: "org-1", PrincipalID: "alice", Invocation: inv("")}
	forAlice := &toolplane.Approval{OrganizationID: "org-1", PrincipalID: "agent-1", Invocation: inv("alice")}
	finance := &toolplane.Approval{OrganizationID: "org-1", PrincipalID: "agent-1", Invocation: inv(""), ApproverGroup: "finance"}
	unreadable := &toolplane.Approval{OrganizationID: "org-1", PrincipalID: "agent-1", Invocation: []byte("{")}
	person := func(subject string, roles ...string) *toolplane.Credential {
		return &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
	}
	agent := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", Roles: []string{toolplane.RoleApprover}}
	tests := []struct {
		name string
		by   *toolplane.Credential
		a    *toolplane.Approval
		want bool
		// why is the start of the refusal's words, which a door shows.
		why string
	}{
		{"an approver", as("alice"), a, true, ""},
		{"another approver", as("bob"), a, true, ""},
		{"a platform_admin", person("root", toolplane.RolePlatformAdmin), a, true, ""},
		{"a person without the role", as("eve"), a, false, "answering approvals needs a person's key with the approver role"},
		{"an agent's key, whatever its roles", agent, a, false, "answering approvals needs a person's key with the approver role; this is an agent's key"},
		{"no credential", nil, a, false, "answering approvals needs"},
		{"an approver of another organization", as("mallory"), a, false, "you may not answer this approval"},
		{"an empty approver", as(""), a, false, "you may not answer this approval"},
		{"the requesting principal itself", as("alice"), self, false, "you may not answer this approval"},
		{"the person the call was asked on behalf of", as("alice"), forAlice, false, "you may not answer this approval"},
		{"another approver of a call asked on behalf of someone", as("bob"), forAlice, true, ""},
		{"an approval whose invocation cannot be read", as("alice"), unreadable, false, "you may not answer this approval"},
		{"an empty approver against an empty principal", as(""), &toolplane.Approval{OrganizationID: "org-1"}, false, "you may not answer"},
		{"a member of the approval's group", person("fin", toolplane.RoleApprover, "group:finance"), finance, true, ""},
		{"an approver outside the approval's group", as("alice"), finance, false, "this approval is for the group finance"},
		{"a member of the group without the approver role", person("fin", "group:finance"), finance, false, "answering approvals needs"},
		{"a platform_admin, a member of every group", person("root", toolplane.RolePlatformAdmin), finance, true, ""},
		{"a member of another group", person("ops", toolplane.RoleApprover, "group:ops"), finance, false, "this approval is for the group finance"},
		// platform_admin holds every role and group, never the right to
		// answer a call made on their own behalf: four eyes hold for them.
		{"a platform_admin the call was asked on behalf of", person("alice", toolplane.RolePlatformAdmin), forAlice, false, "you may not answer this approval"},
		{"a platform_admin asked for, on a group's approval", person("root", toolplane.RolePlatformAdmin),
			&toolplane.Approval{OrganizationID: "org-1", PrincipalID: "agent-1", Invocation: inv("root"), ApproverGroup: "finance"}, false, "you may not answer this approval"},
		{"a platform_admin holding the requesting principal's name", person("alice", toolplane.RolePlatformAdmin), self, false, "you may not answer this approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := approval.MayDecide(tt.by, tt.a)
			if (err == nil) != tt.want {
				t.Fatalf("MayDecide = %v, want allowed %v", err, tt.want)
			}
			if tt.want {
				return
			}
			var denied *toolplane.DeniedError
			if !errors.As(err, &denied) || !errors.Is(err, approval.ErrNotAuthorized) || !errors.Is(err, toolplane.ErrForbidden) || !strings.HasPrefix(denied.Why, tt.why) {
				t.Fatalf("MayDecide = %#v, want a refusal wrapping ErrNotAuthorized saying %q", err, tt.why)
			}
		})
	}
}

// TestReadsNeedTheApproverOrAuditorRole: listing and reading approvals is
// the approvers' and auditors' work, in their own organization.
func TestReadsNeedTheApproverOrAuditorRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.file(t, proposal(t))
	ctx := context.Background()
	person := func(org string, roles ...string) *toolplane.Credential {
		return &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "p", Roles: roles}
	}
	tests := []struct {
		name string
		by   *toolplane.Credential
		// want is how many approvals the list answers; -1 for a refusal.
		want int
	}{
		{"an approver", person("org-1", toolplane.RoleApprover), 1},
		{"an auditor", person("org-1", toolplane.RoleAuditor), 1},
		{"a platform_admin", person("org-1", toolplane.RolePlatformAdmin), 1},
		{"an approver of another organization", person("org-2", toolplane.RoleApprover), 0},
		{"a person without either role", person("org-1", toolplane.RoleToolOwner+":payments"), -1},
		{"an agent's key", &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", Roles: []string{toolplane.RoleAuditor}}, -1},
		{"no credential", nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := f.svc.List(ctx, toolplane.ApprovalPending, "", 10, tt.by)
			one, gerr := f.svc.Get(ctx, a.ID, tt.by)
			if tt.want < 0 {
				var denied *toolplane.DeniedError
				if !errors.As(err, &denied) || !errors.Is(err, approval.ErrNotAuthorized) || !strings.HasPrefix(denied.Why, "listing approvals needs the approver or auditor role") {
					t.Fatalf("List = %v, want a refusal", err)
				}
				if !errors.As(gerr, &denied) || !strings.HasPrefix(denied.Why, "reading approvals needs the approver or auditor role") {
					t.Fatalf("Get = %v, want a refusal", gerr)
				}
				return
			}
			if err != nil || len(got) != tt.want {
				t.Fatalf("List = %d approvals, %v; want %d", len(got), err, tt.want)
			}
			switch {
			case tt.want == 0 && !errors.Is(gerr, toolplane.ErrNotFound):
				t.Fatalf("Get in another organization = %v, want not found", gerr)
			case tt.want == 1 && (gerr != nil || one.ID != a.ID):
				t.Fatalf("Get = %+v, %v", one, gerr)
			}
		})
	}
}

func TestPriorFindsOnlyTheExactCall(t *testing.T) {
	t.Parallel()
	otherHash := hashOf(t, `{"to":"sam@acme.test","body":"x"}`)
	type filed struct {
		name   string
		mutate func(a *toolplane.Approval)
		status toolplane.ApprovalStatus // set after filing; "" keeps pending
	}
	tests := []struct {
		name         string
		filed        []filed       // in filing order, one second apart
		advance      time.Duration // after filing
		wantRejected string
		wantPending  string
		wantApproved string
		wantReused   string
	}{
		{name: "nothing filed"},
		{
			name:        "a pending approval of the call",
			filed:       []filed{{name: "p", status: ""}},
			wantPending: "p",
		},
		{
			name:         "a rejection of the call",
			filed:        []filed{{name: "r", status: toolplane.ApprovalRejected}},
			wantRejected: "r",
		},
		{
			name:         "an approved one is found, an expired one is not",
			filed:        []filed{{name: "a", status: toolplane.ApprovalApproved}, {name: "e", status: toolplane.ApprovalExpired}},
			wantApproved: "a",
		},
		{
			name: "same key, another tool",
			filed: []filed{
				{name: "r", mutate: func(a *toolplane.Approval) { a.Tool = "email.draft" }, status: toolplane.ApprovalRejected},
				{name: "p", mutate: func(a *toolplane.Approval) { a.Tool = "email.draft" }},
			},
		},
		{
			name: "same key, other arguments: the key is reused",
			filed: []filed{
				{name: "r", mutate: func(a *toolplane.Approval) { a.ArgumentsHash = otherHash }, status: toolplane.ApprovalRejected},
				{name: "p", mutate: func(a *toolplane.Approval) { a.ArgumentsHash = otherHash }},
			},
			wantReused: "p",
		},
		{
			name: "another key is not looked at",
			filed: []filed{
				{name: "r", mutate: func(a *toolplane.Approval) { a.Key = "key-2" }, status: toolplane.ApprovalRejected},
				{name: "p", mutate: func(a *toolplane.Approval) { a.Key = "key-2" }},
			},
		},
		{
			// A caller's key names the call in whichever run or session
			// repeats it.
			name: "the same key in another run is the same call",
			filed: []filed{
				{name: "r", mutate: func(a *toolplane.Approval) { a.RunID = "run-2" }, status: toolplane.ApprovalRejected},
				{name: "p", mutate: func(a *toolplane.Approval) { a.RunID = "run-3" }},
			},
			wantRejected: "r",
			wantPending:  "p",
		},
		{
			name:    "an expired pending approval is ignored",
			filed:   []filed{{name: "p"}},
			advance: ttl,
		},
		{
			name:        "a pending approval just before its expiry counts",
			filed:       []filed{{name: "p"}},
			advance:     ttl - time.Microsecond,
			wantPending: "p",
		},
		{
			name: "the exact call among others",
			filed: []filed{
				{name: "r-other-tool", mutate: func(a *toolplane.Approval) { a.Tool = "email.draft" }, status: toolplane.ApprovalRejected},
				{name: "r", status: toolplane.ApprovalRejected},
				{name: "a-other-args", mutate: func(a *toolplane.Approval) { a.ArgumentsHash = otherHash }, status: toolplane.ApprovalApproved},
				{name: "p"},
			},
			wantRejected: "r",
			wantPending:  "p",
		},
		{
			name:         "an approval of the exact call",
			filed:        []filed{{name: "a-other-args", mutate: func(a *toolplane.Approval) { a.ArgumentsHash = otherHash }, status: toolplane.ApprovalApproved}, {name: "a", status: toolplane.ApprovalApproved}},
			wantApproved: "a",
		},
		{
			name:         "the newest of each",
			filed:        []filed{{name: "r-old", status: toolplane.ApprovalRejected}, {name: "e-old", status: toolplane.ApprovalExpired}, {name: "r-new", status: toolplane.ApprovalRejected}, {name: "p-new"}},
			wantRejected: "r-new",
			wantPending:  "p-new",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ids := map[string]string{} // approval ID to its name in the table
			for _, fl := range tt.filed {
				a := proposal(t)
				if fl.mutate != nil {
					fl.mutate(a)
				}
				f.file(t, a)
				ids[a.ID] = fl.name
				if fl.status != "" {
					a.Status = fl.status
					if ok, err := f.store.UpdateApproval(context.Background(), a); !ok || err != nil {
						t.Fatalf("set status: %v %v", ok, err)
					}
				}
				f.clock.Advance(time.Second)
			}
			f.clock.Advance(-time.Second) // the last filing's instant
			f.clock.Advance(tt.advance)
			e, err := f.svc.Prior(context.Background(), "org-1", "key-1", "email.send", hashOf(t, sendArgs))
			if err != nil {
				t.Fatal(err)
			}
			rejected, pending := e.Rejected, e.Pending
			if name := ids[idOf(e.Approved)]; name != tt.wantApproved {
				t.Fatalf("Prior approved %q, want %q", name, tt.wantApproved)
			}
			name := func(a *toolplane.Approval) string {
				if a == nil {
					return ""
				}
				return ids[a.ID]
			}
			if name(e.Reused) != tt.wantReused {
				t.Fatalf("Prior reused %q, want %q", name(e.Reused), tt.wantReused)
			}
			if name(rejected) != tt.wantRejected || name(pending) != tt.wantPending {
				t.Fatalf("Prior = rejected %q, pending %q; want %q, %q", name(rejected), name(pending), tt.wantRejected, tt.wantPending)
			}
			if rejected != nil && rejected.Status != toolplane.ApprovalRejected {
				t.Fatalf("rejected has status %s", rejected.Status)
			}
			if pending != nil && pending.Status != toolplane.ApprovalPending {
				t.Fatalf("pending has status %s", pending.Status)
			}
		})
	}
}

func TestResolveRecordsTheDecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		approver string
		approve  bool
		want     toolplane.ApprovalStatus
	}{
		{"approve", "alice", true, toolplane.ApprovalApproved},
		{"reject", "bob", false, toolplane.ApprovalRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			a := f.file(t, proposal(t))
			f.clock.Advance(10 * time.Minute)
			var checked *toolplane.Approval
			check := func(c *toolplane.Approval) error { checked = c; return nil }
			got, err := f.svc.Resolve(context.Background(), a.ID, approval.Decision{Approve: tt.approve, Reason: "looked right"}, as(tt.approver), check)
			if err != nil {
				t.Fatal(err)
			}
			if tt.approve && (checked == nil || checked.ID != a.ID) {
				t.Fatalf("check saw %+v, want the approval %s", checked, a.ID)
			}
			stored := f.get(t, a.ID)
			for _, r := range []*toolplane.Approval{got, stored} {
				if r.Status != tt.want || r.ResolvedBy != tt.approver || r.Reason != "looked right" ||
					!r.ResolvedAt.Equal(f.clock.Now()) || r.Version != a.Version+1 {
					t.Fatalf("resolved approval = %+v", r)
				}
			}
			// Everything else is as filed.
			want := *a
			want.Status, want.ResolvedBy, want.Reason, want.ResolvedAt, want.Version = stored.Status, stored.ResolvedBy, stored.Reason, stored.ResolvedAt, stored.Version
			if !reflect.DeepEqual(*stored, want) {
				t.Fatalf("stored %+v\nwant   %+v", stored, &want)
			}
		})
	}
}

func TestResolveRefuses(t *testing.T) {
	t.Parallel()
	errVendor := errors.New("the vendor answered 503")
	partialHash := hashOf(t, `{"to":"jo@acme.test"}`)
	tests := []struct {
		name     string
		noAuth   bool
		mutate   func(a *toolplane.Approval) // before filing
		before   func(t *testing.T, f *fixture, a *toolplane.Approval)
		approver string
		approve  bool
		check    func(*toolplane.Approval) error
		wantErr  error
		// wantStatus is the stored status afterwards.
		wantStatus toolplane.ApprovalStatus
	}{
		{
			name:     "already approved",
			before:   resolveAs("bob", true),
			approver: "alice", approve: true,
			wantErr: approval.ErrNotPending, wantStatus: toolplane.ApprovalApproved,
		},
		{
			name:     "already rejected",
			before:   resolveAs("bob", false),
			approver: "alice", approve: true,
			wantErr: approval.ErrNotPending, wantStatus: toolplane.ApprovalRejected,
		},
		{
			name:     "already expired",
			before:   func(t *testing.T, f *fixture, a *toolplane.Approval) { f.clock.Advance(ttl); mustExpire(t, f, a) },
			approver: "alice", approve: true,
			wantErr: approval.ErrNotPending, wantStatus: toolplane.ApprovalExpired,
		},
		{
			name:     "at its expiry",
			before:   func(_ *testing.T, f *fixture, _ *toolplane.Approval) { f.clock.Advance(ttl) },
			approver: "alice", approve: true,
			wantErr: approval.ErrExpired, wantStatus: toolplane.ApprovalExpired,
		},
		{
			name:     "past its expiry, even a rejection",
			before:   func(_ *testing.T, f *fixture, _ *toolplane.Approval) { f.clock.Advance(2 * ttl) },
			approver: "alice", approve: false,
			wantErr: approval.ErrExpired, wantStatus: toolplane.ApprovalExpired,
		},
		{
			name:     "a person without the approver role",
			approver: "eve", approve: true,
			wantErr: approval.ErrNotAuthorized, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "an empty approver",
			approver: "", approve: false,
			wantErr: approval.ErrNotAuthorized, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "the requesting principal itself",
			mutate:   func(a *toolplane.Approval) { a.PrincipalID = "alice" },
			approver: "alice", approve: true,
			wantErr: approval.ErrNotAuthorized, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "the person the call was asked on behalf of",
			mutate:   func(a *toolplane.Approval) { a.Invocation = []byte(`{"OrganizationID":"org-1","UserID":"alice"}`) },
			approver: "alice", approve: true,
			wantErr: approval.ErrNotAuthorized, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "a stored invocation that cannot be read",
			mutate:   func(a *toolplane.Approval) { a.Invocation = []byte(`{`) },
			approver: "alice", approve: true,
			wantErr: approval.ErrNotAuthorized, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "a person outside the approval's group",
			mutate:   func(a *toolplane.Approval) { a.ApproverGroup = "finance" },
			approver: "alice", approve: true,
			wantErr: approval.ErrNotAuthorized, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "no credential",
			noAuth:   true,
			approver: "alice", approve: true,
			wantErr: approval.ErrNotAuthorized, wantStatus: toolplane.ApprovalPending,
		},
		{
			name: "arguments not matching their hash",
			mutate: func(a *toolplane.Approval) {
				a.Arguments = []byte(`{"to":"eve@evil.test","body":"The refund is on its way."}`)
			},
			approver: "alice", approve: true,
			wantErr: approval.ErrTampered, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "arguments that are not JSON",
			mutate:   func(a *toolplane.Approval) { a.Arguments = []byte(`{"to":`) },
			approver: "alice", approve: true,
			wantErr: approval.ErrTampered, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "a hash of other arguments",
			mutate:   func(a *toolplane.Approval) { a.ArgumentsHash = partialHash },
			approver: "alice", approve: true,
			wantErr: approval.ErrTampered, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "a stale tool",
			approver: "alice", approve: true,
			check:   func(*toolplane.Approval) error { return approval.ErrStale },
			wantErr: approval.ErrStale, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "another check error",
			approver: "alice", approve: true,
			check:   func(*toolplane.Approval) error { return errVendor },
			wantErr: errVendor, wantStatus: toolplane.ApprovalPending,
		},
		{
			name:     "an unknown approval",
			before:   func(*testing.T, *fixture, *toolplane.Approval) {},
			approver: "alice", approve: true,
			wantErr: toolplane.ErrNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			a := proposal(t)
			if tt.mutate != nil {
				tt.mutate(a)
			}
			f.file(t, a)
			if tt.before != nil {
				tt.before(t, f, a)
			}
			id := a.ID
			if tt.wantErr == toolplane.ErrNotFound {
				id = "apr_missing"
			}
			before := f.get(t, a.ID)
			by := as(tt.approver)
			if tt.noAuth {
				by = nil
			}
			got, err := f.svc.Resolve(context.Background(), id, approval.Decision{Approve: tt.approve, Reason: "r"}, by, tt.check)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Resolve error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == toolplane.ErrNotFound || tt.noAuth {
				if got != nil {
					t.Fatalf("Resolve answered %+v for an unknown approval", got)
				}
				if stored := f.get(t, a.ID); !reflect.DeepEqual(stored, before) {
					t.Fatalf("a refused resolution changed the approval:\n%+v\n%+v", before, stored)
				}
				return
			}
			if got == nil || got.ID != a.ID {
				t.Fatalf("Resolve answered %+v, want the refused approval", got)
			}
			stored := f.get(t, a.ID)
			if stored.Status != tt.wantStatus || got.Status != tt.wantStatus {
				t.Fatalf("status stored %s, answered %s; want %s", stored.Status, got.Status, tt.wantStatus)
			}
			switch {
			case tt.wantErr == approval.ErrExpired:
				if !stored.ResolvedAt.Equal(f.clock.Now()) || stored.ResolvedBy != "" || stored.Reason != "expired: default deny" ||
					stored.Version != before.Version+1 {
					t.Fatalf("expired approval = %+v", stored)
				}
			default:
				if !reflect.DeepEqual(stored, before) {
					t.Fatalf("a refused resolution changed the approval:\n%+v\n%+v", before, stored)
				}
			}
		})
	}
}

// resolveAs answers a step resolving the approval by approver.
func resolveAs(approver string, approve bool) func(t *testing.T, f *fixture, a *toolplane.Approval) {
	return func(t *testing.T, f *fixture, a *toolplane.Approval) {
		t.Helper()
		if _, err := f.svc.Resolve(context.Background(), a.ID, approval.Decision{Approve: approve}, as(approver), nil); err != nil {
			t.Fatal(err)
		}
	}
}

func mustExpire(t *testing.T, f *fixture, a *toolplane.Approval) {
	t.Helper()
	ok, err := f.svc.Expire(context.Background(), a)
	if !ok || err != nil {
		t.Fatalf("Expire = %v, %v", ok, err)
	}
}

func TestRejectSkipsTheHashAndTheCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := proposal(t)
	a.Arguments = []byte(`{"to":"eve@evil.test"}`) // does not match its hash
	f.file(t, a)
	called := false
	check := func(*toolplane.Approval) error { called = true; return approval.ErrStale }
	got, err := f.svc.Resolve(context.Background(), a.ID, approval.Decision{Reason: "no"}, as("alice"), check)
	if err != nil {
		t.Fatalf("reject: %v", err)
	}
	if called {
		t.Fatal("a rejection ran the check")
	}
	if got.Status != toolplane.ApprovalRejected || f.get(t, a.ID).Status != toolplane.ApprovalRejected {
		t.Fatalf("status %s, want rejected", got.Status)
	}
}

func TestExpireOnlyExpiresAPendingApprovalPastItsExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		resolve *bool // resolve first: approve or reject
		advance time.Duration
		stale   bool // expire an out-of-date copy
		want    bool
		status  toolplane.ApprovalStatus
	}{
		{name: "pending before its expiry", advance: ttl - time.Microsecond, want: false, status: toolplane.ApprovalPending},
		{name: "pending at its expiry", advance: ttl, want: true, status: toolplane.ApprovalExpired},
		{name: "pending past its expiry", advance: 3 * ttl, want: true, status: toolplane.ApprovalExpired},
		{name: "approved past its expiry", resolve: new(true), advance: 3 * ttl, want: false, status: toolplane.ApprovalApproved},
		{name: "rejected past its expiry", resolve: new(false), advance: 3 * ttl, want: false, status: toolplane.ApprovalRejected},
		{name: "a stale copy", resolve: new(true), stale: true, advance: 3 * ttl, want: false, status: toolplane.ApprovalApproved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			a := f.file(t, proposal(t))
			copyBefore := *a
			if tt.resolve != nil {
				resolveAs("alice", *tt.resolve)(t, f, a)
			}
			target := f.get(t, a.ID)
			if tt.stale {
				target = &copyBefore // still pending, at the filing's version
			}
			held := *target
			f.clock.Advance(tt.advance)
			ok, err := f.svc.Expire(context.Background(), target)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.want {
				t.Fatalf("Expire = %v, want %v", ok, tt.want)
			}
			stored := f.get(t, a.ID)
			if stored.Status != tt.status {
				t.Fatalf("stored status %s, want %s", stored.Status, tt.status)
			}
			if !ok {
				if !reflect.DeepEqual(*target, held) {
					t.Fatalf("Expire changed the copy it did not expire: %+v", target)
				}
				return
			}
			if !reflect.DeepEqual(target, stored) {
				t.Fatalf("expired copy %+v\nstored       %+v", target, stored)
			}
			if !stored.ResolvedAt.Equal(f.clock.Now()) || stored.Reason != "expired: default deny" || stored.ResolvedBy != "" {
				t.Fatalf("expired approval = %+v", stored)
			}
			again, err := f.svc.Expire(context.Background(), target)
			if again || err != nil {
				t.Fatalf("second Expire = %v, %v; want false", again, err)
			}
		})
	}
}

func TestConcurrentResolveHasOneWinner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for round := range 20 {
		a := f.file(t, proposal(t))
		decisions := []approval.Decision{{Approve: true, Reason: "yes"}, {Approve: false, Reason: "no"}}
		by := []string{"alice", "bob"}
		results := make([]*toolplane.Approval, len(decisions))
		errs := make([]error, len(decisions))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, d := range decisions {
			wg.Go(func() {
				<-start
				results[i], errs[i] = f.svc.Resolve(context.Background(), a.ID, d, as(by[i]), nil)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: both resolutions succeeded", round)
				}
				winner = i
			case !errors.Is(err, approval.ErrNotPending):
				t.Fatalf("round %d: loser error = %v, want ErrNotPending", round, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no resolution succeeded: %v", round, errs)
		}
		stored := f.get(t, a.ID)
		w := decisions[winner]
		if stored.ResolvedBy != by[winner] || stored.Reason != w.Reason || stored.Status != results[winner].Status {
			t.Fatalf("round %d: stored %+v, winner %+v", round, stored, w)
		}
	}
}

func TestInvocationRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		inv  *toolplane.Invocation
	}{
		{"empty", &toolplane.Invocation{}},
		{"every field", &toolplane.Invocation{
			OrganizationID: "org-1", UserID: "user-1", RunID: "run-2", RootRunID: "run-1", AgentID: "agent-1",
			StepPath: "node-3", Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"email.send", "crm.update"}},
			Ceilings: toolplane.Ceilings{MaxCostCents: 12345}, Deadline: time.Date(2026, 5, 4, 17, 0, 0, 1, time.UTC),
			Source: toolplane.SourceMCP, AuthorizedBy: "apr_0123", IdempotencyKey: "idem-1", Hops: 3,
			Contracts: map[string]string{"email.send": "sha256:abc"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			b, err := approval.EncodeInvocation(tt.inv)
			if err != nil {
				t.Fatal(err)
			}
			// Through the store, as an approval carries it.
			a := proposal(t)
			a.Invocation = b
			f.file(t, a)
			got, err := approval.DecodeInvocation(f.get(t, a.ID).Invocation)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.inv) {
				t.Fatalf("round trip = %+v\nwant         %+v", got, tt.inv)
			}
		})
	}
}

func TestDecodeInvocationRefusesMalformedBytes(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{nil, []byte(`{"OrganizationID":`), []byte(`[1]`), []byte(`{"Hops":"three"}`)} {
		inv, err := approval.DecodeInvocation(b)
		if err == nil || inv != nil || !strings.HasPrefix(err.Error(), "stored invocation: ") {
			t.Errorf("DecodeInvocation(%q) = %+v, %v; want a stored invocation error", b, inv, err)
		}
	}
}

func TestEscalateFilesOneSuccessorEvenWhenRunAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := proposal(t)
	a.DefaultOnTimeout = toolplane.OnTimeoutEscalate
	a.Invocation = []byte(`{"OrganizationID":"org-1","AgentID":"agent-1","UserID":"user-1"}`)
	f.file(t, a)
	ctx := context.Background()
	if _, err := f.svc.Escalate(ctx, a, "directors", 2*time.Hour); !errors.Is(err, approval.ErrNotPending) {
		t.Fatalf("escalated before expiry: %v", err)
	}
	f.clock.Advance(ttl)
	// A late answer leaves an escalating approval to its expiry job.
	if _, err := f.svc.Resolve(ctx, a.ID, approval.Decision{Approve: true}, as("alice"), nil); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("late answer: %v", err)
	}
	if got := f.get(t, a.ID); got.Status != toolplane.ApprovalPending {
		t.Fatalf("a late answer applied deny to an escalating approval: %+v", got)
	}
	next, err := f.svc.Escalate(ctx, a, "directors", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if next.EscalatedFrom != a.ID || next.Level != 1 || next.ApproverGroup != "directors" || next.Status != toolplane.ApprovalPending ||
		!next.ExpiresAt.Equal(f.clock.Now().Add(2*time.Hour)) || next.ArgumentsHash != a.ArgumentsHash {
		t.Fatalf("successor = %+v", next)
	}
	old := f.get(t, a.ID)
	if old.Status != toolplane.ApprovalExpired || !strings.Contains(old.Reason, next.ID) {
		t.Fatalf("predecessor = %+v", old)
	}
	// The job runs again (a retry, or a second node): the same successor.
	again, err := f.svc.Escalate(ctx, old, "directors", 2*time.Hour)
	if err != nil || again.ID != next.ID {
		t.Fatalf("second escalation = %+v, %v", again, err)
	}
	pending, _, err := f.store.ListApprovals(ctx, "org-1", toolplane.ApprovalPending, "", 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending approvals = %+v, %v", pending, err)
	}
	// The escalation is audited once, with the change, naming the call and
	// its successor.
	evs, _, err := f.store.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events = %+v, %v; want one", evs, err)
	}
	if e := evs[0]; e.Outcome != approval.EscalatedOutcome || e.ApprovalID != a.ID || e.AuthorizedBy != next.ID || e.Key != a.Key ||
		e.AgentID != "agent-1" || e.UserID != "user-1" || e.RunID != "run-1" || e.ArgumentsHash != a.ArgumentsHash || !strings.Contains(e.Reason, next.ID) {
		t.Fatalf("event = %+v", e)
	}
}

func idOf(a *toolplane.Approval) string {
	if a == nil {
		return ""
	}
	return a.ID
}

// An approval that expires has its approval_expired audit event, stored
// with the change, whoever finds it expired: the expiry job (Expire) or a
// person answering too late (Resolve). Found again, it has no second one.
func TestExpiryIsAuditedWithTheChange(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"expire", "late answer"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			a := f.file(t, proposal(t))
			f.clock.Advance(ttl + time.Second)
			for range 2 {
				if by == "expire" {
					_, err := f.svc.Expire(context.Background(), f.get(t, a.ID))
					if err != nil {
						t.Fatal(err)
					}
				} else if _, err := f.svc.Resolve(context.Background(), a.ID, approval.Decision{Approve: true}, as("alice"), nil); err == nil {
					t.Fatal("a late answer was accepted")
				}
			}
			if got := f.get(t, a.ID); got.Status != toolplane.ApprovalExpired {
				t.Fatalf("status = %s", got.Status)
			}
			evs, _, err := f.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 {
				t.Fatalf("events = %+v; want one", evs)
			}
			e := evs[0]
			if e.Outcome != approval.ExpiredOutcome || e.ApprovalID != a.ID || e.Key != a.Key || e.RunID != "run-1" ||
				e.Tool != "email.send" || e.ArgumentsHash != a.ArgumentsHash || e.Reason == "" {
				t.Fatalf("event = %+v", e)
			}
		})
	}
}

// TestFileAnswersTheCallsPendingApproval: a call (organization, tool,
// key) that already waits for a person is not filed again: File answers
// its pending approval, in whichever run it was asked. A pending one past
// its expiry whose default is deny is expired there and then (with its
// audit event) and the call filed anew; one whose default is escalate is
// the expiry job's to replace, and answers. The key with other arguments
// is another call under a reused key, refused with ErrKeyReused.
func TestFileAnswersTheCallsPendingApproval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		onTimeout string
		advance   time.Duration
		mutate    func(a *toolplane.Approval)
		existing  bool  // the first approval answers
		wantErr   error // File's error
		expired   bool  // the first approval is expired, audited
	}{
		{name: "the same call", existing: true},
		{name: "the same call in another run", mutate: func(a *toolplane.Approval) { a.RunID = "run-2" }, existing: true},
		{name: "the same key with other arguments", mutate: func(a *toolplane.Approval) { a.Arguments, a.ArgumentsHash = []byte(`{}`), hashOf(t, `{}`) }, wantErr: approval.ErrKeyReused},
		{name: "past its expiry, denied by default", advance: ttl, expired: true},
		{name: "past its expiry, escalated by default", onTimeout: toolplane.OnTimeoutEscalate, advance: ttl, existing: true},
		{name: "another key", mutate: func(a *toolplane.Approval) { a.Key = "key-2" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			p := proposal(t)
			p.DefaultOnTimeout = tt.onTimeout
			first := f.file(t, p)
			f.clock.Advance(tt.advance)
			again := proposal(t)
			again.DefaultOnTimeout = tt.onTimeout
			if tt.mutate != nil {
				tt.mutate(again)
			}
			existing, err := f.svc.File(context.Background(), again)
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("File again = %v, want %v", err, tt.wantErr)
			}
			if existing != tt.existing || (existing && again.ID != first.ID) || (!existing && err == nil && again.ID == first.ID) {
				t.Fatalf("File again = existing %v, ID %s (first %s); want existing %v", existing, again.ID, first.ID, tt.existing)
			}
			pending, _, err := f.svc.List(context.Background(), toolplane.ApprovalPending, "", 10, as("alice"))
			if err != nil {
				t.Fatal(err)
			}
			want := 1
			if !tt.existing && tt.wantErr == nil && !tt.expired {
				want = 2 // another call
			}
			if len(pending) != want {
				t.Fatalf("%d pending approvals, want %d", len(pending), want)
			}
			stored := f.get(t, first.ID)
			if got := stored.Status == toolplane.ApprovalExpired; got != tt.expired {
				t.Fatalf("the first approval is %s; want expired %v", stored.Status, tt.expired)
			}
			if tt.expired {
				events, _, err := f.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 10)
				if err != nil || len(events) != 1 || events[0].Outcome != approval.ExpiredOutcome || events[0].ApprovalID != first.ID {
					t.Fatalf("audit events = %+v, %v; want the first approval's expiry", events, err)
				}
			}
		})
	}
}
