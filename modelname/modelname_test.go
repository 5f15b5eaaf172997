package modelname

import (
	"errors"
	"strings"
	"testing"
)

func TestNameDerivation(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"email.send", "email_send"},
		{"payments.refund_order", "payments_refund_order"},
		{"mcp.github.create-issue", "mcp_github_create-issue"},
		{"a b/c:d", "a_b_c_d"},
		{"crm.café", "crm_caf_"},
		{"Already_OK-1", "Already_OK-1"},
	}
	for _, tt := range tests {
		if got := Derive(tt.in); got != tt.want {
			t.Errorf("Derive(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !Valid(Derive(tt.in)) {
			t.Errorf("Derive(%q) is not a valid model-facing name", tt.in)
		}
	}
}

func TestNameCollisionsRefusedNeverTruncated(t *testing.T) {
	t.Parallel()
	_, err := New([]string{"crm.search_people", "crm_search.people", "mcp.slack.send_message", "mcp.slack_send.message", "email.send"})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrCollision) {
		t.Fatalf("err = %v, want collisions", err)
	}
	if len(e.Refused) != 2 {
		t.Fatalf("problems = %v, want both collisions", e.Refused)
	}
	for _, p := range e.Refused {
		if !strings.Contains(p.Error(), "rename") || p.Other == "" {
			t.Errorf("problem does not name the other tool and the fix: %v", p)
		}
	}
}

func TestNameOver64Refused(t *testing.T) {
	t.Parallel()
	long := "mcp.a_very_long_connection_slug_for_a_server." + strings.Repeat("x", 30)
	_, err := New([]string{long})
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("err = %v, want ErrTooLong", err)
	}
	exact := "a." + strings.Repeat("b", 62)
	if _, err := New([]string{exact}); err != nil {
		t.Fatalf("64-character name refused: %v", err)
	}
}

func TestNameReverseMap(t *testing.T) {
	t.Parallel()
	m, err := New([]string{"email.send", "crm.search_people"})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := m.Model("email.send"); d != "email_send" {
		t.Errorf("Model = %q", d)
	}
	if p, ok := m.Platform("email_send"); !ok || p != "email.send" {
		t.Errorf("Platform = %q %v", p, ok)
	}
	if _, ok := m.Platform("crm_search.people"); ok {
		t.Errorf("an unmapped name was answered")
	}
	if _, ok := m.Platform("email.send"); ok {
		t.Errorf("a platform name was accepted as a model-facing name")
	}
}

func TestNameDuplicateAndEmptyRefused(t *testing.T) {
	t.Parallel()
	if _, err := New([]string{"a.b", "a.b"}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := New([]string{""}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v", err)
	}
}
