package door_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/invoke"
)

func TestParseTimeoutSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "2", want: 2 * time.Second},
		{in: "0.5", want: 500 * time.Millisecond},
		{in: "1.25", want: 1250 * time.Millisecond},
		{in: ".001", want: time.Millisecond},
		{in: "315360000", want: 315360000 * time.Second}, // ten years
		{in: "99999999999999999999", want: 100 * 365 * 24 * time.Hour},
		{in: "", bad: true},
		{in: "0", bad: true},
		{in: "0.0", bad: true},
		{in: ".", bad: true},
		{in: "-1", bad: true},
		{in: "+1", bad: true},
		{in: "1e3", bad: true},
		{in: "0x10", bad: true},
		{in: "inf", bad: true},
		{in: "NaN", bad: true},
		{in: "1.2.3", bad: true},
		{in: " 2", bad: true},
		{in: "2s", bad: true},
	}
	for _, tt := range tests {
		got, err := door.ParseTimeoutSeconds(tt.in)
		switch {
		case tt.bad && !errors.Is(err, door.ErrTimeout):
			t.Errorf("ParseTimeoutSeconds(%q) = %v, %v; want ErrTimeout", tt.in, got, err)
		case !tt.bad && (err != nil || got != tt.want):
			t.Errorf("ParseTimeoutSeconds(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestTimeoutMillis(t *testing.T) {
	t.Parallel()
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := door.TimeoutMillis(bad); !errors.Is(err, door.ErrTimeout) {
			t.Errorf("TimeoutMillis(%v) = %v, want ErrTimeout", bad, err)
		}
	}
	for in, want := range map[float64]time.Duration{1: time.Millisecond, 0.5: 500 * time.Microsecond, 1500: 1500 * time.Millisecond, 1e300: 100 * 365 * 24 * time.Hour} {
		if got, err := door.TimeoutMillis(in); err != nil || got != want {
			t.Errorf("TimeoutMillis(%v) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestInvocationCarriesTheDeadlineAndHops(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.door.Now = func() time.Time { return now }
	cred := &toolplane.Credential{ID: "key-1", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot"}
	tests := []struct {
		name     string
		call     door.Call
		deadline time.Time
		hops     int
	}{
		{"nothing asked", door.Call{}, time.Time{}, invoke.DefaultMaxHops},
		{"a timeout", door.Call{Timeout: 250 * time.Millisecond}, now.Add(250 * time.Millisecond), invoke.DefaultMaxHops},
		{"fewer hops", door.Call{Hops: 3, HopsAsked: true}, time.Time{}, 3},
		{"no hop", door.Call{Hops: 0, HopsAsked: true}, time.Time{}, 0},
		{"hops forged upward", door.Call{Hops: 1000, HopsAsked: true}, time.Time{}, invoke.DefaultMaxHops},
		{"hops below zero", door.Call{Hops: -1, HopsAsked: true}, time.Time{}, -1},
	}
	for _, tt := range tests {
		inv := f.door.Invocation(cred, tt.call)
		if !inv.Deadline.Equal(tt.deadline) || inv.Hops != tt.hops {
			t.Errorf("%s: deadline %v hops %d; want %v and %d", tt.name, inv.Deadline, inv.Hops, tt.deadline, tt.hops)
		}
	}
}

func TestCallWithTooLittleTimeOrNoHop(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	agent := f.caller(t, f.mint(t, toolplane.CredentialAgent, "bot", nil, []string{"crm.*"}, nil))
	for _, tt := range []struct {
		call door.Call
		code toolplane.Code
	}{
		{door.Call{Tool: "crm.note", RunID: "run-1", Timeout: time.Millisecond}, toolplane.CodeDeadlineExceeded},
		{door.Call{Tool: "crm.note", RunID: "run-2", Hops: -1, HopsAsked: true}, toolplane.CodeMaxHopsExceeded},
	} {
		tt.call.Source = toolplane.SourceREST
		a := f.door.Call(context.Background(), agent, tt.call)
		if a.Kind != door.Answered || a.Result.OK || a.Result.Error.Code != tt.code {
			t.Fatalf("%+v: answer %+v, want %s", tt.call, a, tt.code)
		}
	}
	// Ten years runs, under the tool's own timeout.
	a := f.door.Call(context.Background(), agent, door.Call{Tool: "crm.lookup", Source: toolplane.SourceREST, Timeout: 10 * 365 * 24 * time.Hour})
	if a.Kind != door.Answered || !a.Result.OK {
		t.Fatalf("answer %+v", a)
	}
}
