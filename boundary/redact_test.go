package boundary_test

import (
	"reflect"
	"testing"

	"github.com/toolplane/toolplane/boundary"
)

func TestIsCredentialKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want bool
	}{
		{"token", true},
		{"API_KEY", true},
		{"apiKey", true},
		{"api-key", true},
		{"x-api-key", true},
		{"X-Api-Key", true},
		{"Authorization", true},
		{"Proxy-Authorization", true},
		{"access_token", true},
		{"refresh.token", true},
		{"id token", true},
		{"client_secret", true},
		{"PASSWORD", true},
		{"passwd", true},
		{"private_key", true},
		{"Cookie", true},
		{"Set-Cookie", true},
		{"session_token", true},
		{"bearer_token", true},
		{"secret", true},
		{"__token__", true},
		{"api\u212Aey", true}, // the Kelvin sign lowercases to k
		{"max_tokens", false},
		{"token_count", false},
		{"tokens", false},
		{"password_hint_shown", false},
		{"secretary", false},
		{"author", false},
		{"", false},
		{"a_very_long_key_name_that_is_not_a_credential", false},
		{"tökén", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := boundary.IsCredentialKey(tt.name); got != tt.want {
				t.Fatalf("IsCredentialKey(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestRedactionByKeyNameAnyDepth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			"top level",
			`{"api_key":"sk-1","name":"a"}`,
			`{"api_key":"[redacted]","name":"a"}`,
		},
		{
			"inside arrays and nested objects",
			`[{"id":1,"auth":{"headers":{"Authorization":"Bearer x","Accept":"json"}}},[[{"password":"p"}]]]`,
			`[{"auth":{"headers":{"Accept":"json","Authorization":"[redacted]"}},"id":1},[[{"password":"[redacted]"}]]]`,
		},
		{
			"a whole object under a credential key",
			`{"token":{"value":"t","expires":3},"n":1}`,
			`{"n":1,"token":"[redacted]"}`,
		},
		{
			"numbers, nulls and arrays are replaced too",
			`{"secret":42,"cookie":null,"set-cookie":["a","b"]}`,
			`{"cookie":"[redacted]","secret":"[redacted]","set-cookie":"[redacted]"}`,
		},
		{
			"values are never scanned",
			`{"body":"my password is hunter2","max_tokens":100,"token_count":7,"note":"token=abc"}`,
			`{"body":"my password is hunter2","max_tokens":100,"note":"token=abc","token_count":7}`,
		},
		{
			"scalars pass through",
			`"password"`,
			`"password"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := tree(t, tt.in)
			before := string(boundary.Encode(nil, in))
			got := boundary.Redact(in)
			if string(boundary.Encode(nil, got)) != tt.want {
				t.Fatalf("Redact = %s, want %s", boundary.Encode(nil, got), tt.want)
			}
			if after := string(boundary.Encode(nil, in)); after != before {
				t.Fatalf("Redact modified its input: %s became %s", before, after)
			}
			if again := boundary.Redact(got); !reflect.DeepEqual(again, got) {
				t.Fatalf("Redact is not idempotent")
			}
		})
	}
}

type credentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

func TestRedactNormalisesOtherValues(t *testing.T) {
	t.Parallel()
	got := boundary.Redact([]any{credentials{User: "u", Password: "p"}})
	if want := `[{"password":"[redacted]","user":"u"}]`; string(boundary.Encode(nil, got)) != want {
		t.Fatalf("Redact = %s, want %s", boundary.Encode(nil, got), want)
	}
}
