package boundary_test

import (
	"reflect"
	"strings"
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
		// Names ending in a credential word, whatever comes first.
		{"db_password", true},
		{"DB_PASSWORD", true},
		{"github_token", true},
		{"GITHUB_TOKEN", true},
		{"secret_key", true},
		{"aws_secret_access_key", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"stripe_api_key", true},
		{"stripeApiKey", true},
		{"bearer", true},
		{"webhook_secret", true},
		{"csrf-token", true},
		{"v2_token", true},
		{"ssh_passphrase", true},
		{"signing_key", true},
		{"session_cookie", true},
		{"x_secrets", true},
		{"a_very_long_prefix_that_goes_past_the_window_then_password", true},
		{"tökén_secret", true},
		{"credentials", true},
		{"client_credentials", true},
		{"aws_credential", true},
		{"pwd", true},
		{"db_pwd", true},
		{"passcode", true},
		{"session_id", true},
		{"sessionid", true},
		{"SessionId", true},
		{"auth", true},
		{"Auth", true},
		// Counts, cursors, and names that only contain a credential word.
		{"max_tokens", false},
		{"tokens_used", false},
		{"total_tokens", false},
		{"completion_tokens", false},
		{"token_type", false},
		{"next_page_token", false},
		{"nextPageToken", false},
		{"continuation_token", false},
		{"primary_key", false},
		{"idempotency_key", false},
		{"public_key", false},
		{"aws_access_key_id", false},
		{"payment_authorization", false},
		{"password_policy", false},
		{"secret_santa", false},
		{"token_count", false},
		{"tokens", false},
		{"password_hint_shown", false},
		{"secretary", false},
		{"author", false},
		{"authority", false},
		{"authors", false},
		{"oauth", false},
		{"oauth_provider", false},
		{"basic_auth_enabled", false},
		{"session_id_count", false},
		{"credentials_expiry", false},
		{"pw", false},
		{"", false},
		{"a_very_long_key_name_that_is_not_a_credential_name", false},
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
			`[{"id":1,"request":{"headers":{"Authorization":"Bearer x","Accept":"json"}}},[[{"password":"p"}]]]`,
			`[{"id":1,"request":{"headers":{"Accept":"json","Authorization":"[redacted]"}}},[[{"password":"[redacted]"}]]]`,
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
			"prose is never judged, a credential named in text is",
			`{"body":"my password is hunter2","max_tokens":100,"token_count":7,"note":"token=abc","limit":"max_tokens=100"}`,
			`{"body":"my password is hunter2","limit":"max_tokens=100","max_tokens":100,"note":"token=[redacted]","token_count":7}`,
		},
		{
			"names ending in a credential word",
			`{"db_password":"p","github_token":"t","aws_secret_access_key":"k","stripe_api_key":"s","bearer":"b","tokens_used":3}`,
			`{"aws_secret_access_key":"[redacted]","bearer":"[redacted]","db_password":"[redacted]","github_token":"[redacted]","stripe_api_key":"[redacted]","tokens_used":3}`,
		},
		{
			"secrets found in values, at any depth",
			`{"log":["Authorization: Bearer abcdef0123456789 sent"],"note":"key ghp_0123456789abcdefghijABCDEFGHIJ012345 here"}`,
			`{"log":["Authorization: Bearer [redacted] sent"],"note":"key [redacted] here"}`,
		},
		{
			"a secret's shape in a key, which a free-form object lets a caller or a downstream choose",
			`{"labels":{"ghp_0123456789abcdefghijABCDEFGHIJ012345":"x","env":"prod"}}`,
			`{"labels":{"[redacted]":"x","env":"prod"}}`,
		},
		{
			"two such keys in one object keep both entries",
			`{"ghp_0123456789abcdefghijABCDEFGHIJ012345":1,"ghp_9876543210abcdefghijABCDEFGHIJ012345":2}`,
			`{"[redacted]":1,"[redacted] (2)":2}`,
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

func TestRedactSecrets(t *testing.T) {
	t.Parallel()
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY-----"
	tests := []struct {
		name, in, want string
	}{
		{"github classic", "ghp_0123456789abcdefghijABCDEFGHIJ012345", "[redacted]"},
		{"github oauth", "token gho_0123456789abcdefghijABCDEFGHIJ012345.", "token [redacted]."},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "[redacted]"},
		{"stripe live", "use sk_live_51H8abcdefghijklmnop now", "use [redacted] now"},
		{"stripe test", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "[redacted]"},
		{"stripe restricted", "rk_live_0123456789abcdefghij", "[redacted]"},
		{"openai style", "OPENAI=sk-proj-0123456789abcdefghijklmnopqrstuvwxyz", "OPENAI=[redacted]"},
		{"slack bot", "xoxb-123456789012-1234567890123-abcdefghij", "[redacted]"},
		{"aws access key id", "AKIAIOSFODNN7EXAMPLE is the id", "[redacted] is the id"},
		{"aws session key id", "(ASIAY34FZKBOKMUTVV7A)", "([redacted])"},
		{"pem private key", "before\n" + pem + "\nafter", "before\n[redacted]\nafter"},
		{"pem cut off", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "[redacted]"},
		{"jwt", "token=" + jwt, "token=[redacted]"},
		{"bearer header", "Authorization: Bearer abc.def-ghi_jkl~mno+p/q=", "Authorization: Bearer [redacted]"},
		{"bearer lower case", "bearer 0123456789abcdef", "bearer [redacted]"},
		{"two in one string", "ghp_0123456789abcdefghijABCDEFGHIJ012345 and AKIAIOSFODNN7EXAMPLE", "[redacted] and [redacted]"},

		{"short", "ghp_short", "ghp_short"},
		{"prose about passwords", "Reset your password and token settings here.", "Reset your password and token settings here."},
		{"inside a word", "task_live_0123456789abcdefghij", "task_live_0123456789abcdefghij"},
		{"disk name", "disk-0123456789abcdefghijklmnopqrstuvwxyz", "disk-0123456789abcdefghijklmnopqrstuvwxyz"},
		{"akia too long", "AKIAIOSFODNN7EXAMPLEX", "AKIAIOSFODNN7EXAMPLEX"},
		{"akia too short", "AKIAIOSFODNN7EXAMPL", "AKIAIOSFODNN7EXAMPL"},
		{"public key block", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----"},
		{"certificate", "-----BEGIN CERTIFICATE-----\nMIIB", "-----BEGIN CERTIFICATE-----\nMIIB"},
		{"not a jwt", "eyJust a word. eyJanother.", "eyJust a word. eyJanother."},
		{"bearer word", "The bearer of this letter is welcome.", "The bearer of this letter is welcome."},
		{"bearer short", "Bearer abc", "Bearer abc"},
		{"email and date", "person00001@example.com 2024-05-01T12:00:00Z", "person00001@example.com 2024-05-01T12:00:00Z"},
		{"slack word", "xoxo-hugs and kisses", "xoxo-hugs and kisses"},

		// Credentials named in text, by the rule on keys.
		{"env line", "db_password=hunter2", "db_password=[redacted]"},
		{"colon", "password:hunter3", "password:[redacted]"},
		{"colon and space", "login failed (password: hunter3) for ada", "login failed (password: [redacted]) for ada"},
		{"client secret", "client_id=abc client_secret=s3cr3t-value", "client_id=abc client_secret=[redacted]"},
		{"aws secret", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\nAWS_REGION=eu-west-1",
			"AWS_SECRET_ACCESS_KEY=[redacted]\nAWS_REGION=eu-west-1"},
		{"lower aws secret", "aws_secret_access_key = wJalrXUtnFEMI", "aws_secret_access_key = [redacted]"},
		{"json in text", `upstream said {"user": "ada", "password": "hunter2", "n": 1}`, `upstream said {"user": "ada", "password": "[redacted]", "n": 1}`},
		{"escaped json in text", `{\"api_key\":\"abc123\"}`, `{\"api_key\":\"[redacted]\"}`},
		{"single quotes", "secret='a b c'", "secret='[redacted]'"},
		{"query token", "GET https://h.example/v1?token=supersecret123&page=2 failed", "GET https://h.example/v1?token=[redacted]&page=2 failed"},
		{"query access token", "https://h/?a=1&access_token=zzz", "https://h/?a=1&access_token=[redacted]"},
		{"query api key", "see https://h/x?api_key=k-123#frag", "see https://h/x?api_key=[redacted]#frag"},
		{"userinfo", "dial mongodb://admin:s3cretpw@db.internal:27017/app: refused", "dial mongodb://[redacted]@db.internal:27017/app: refused"},
		{"userinfo and query", "postgres://u:p@h/db?password=x", "postgres://[redacted]@h/db?password=[redacted]"},
		{"user name as token", "https://ada@h.example/x", "https://[redacted]@h.example/x"},
		{"token in a path", "GET https://actions.example.com/mcp/sk-ak-Zq9x7Hc2LmN4pQ8rT1vW/sse?x=1 failed",
			"GET https://actions.example.com/mcp/[redacted]/sse?x=1 failed"},
		{"known shape in a path", "see https://h/hooks/ghp_0123456789abcdefghijABCDEFGHIJ012345.", "see https://h/hooks/[redacted]."},
		{"webhook path", `"url": "https://hooks.example.com/services/T000A1B2C/B000D3E4F/XyZ9aBc8DeF7gHi6JkL5mNo4"`,
			`"url": "https://hooks.example.com/services/T000A1B2C/B000D3E4F/[redacted]"`},
		{"authorization header", "Authorization: Basic YWRtaW46aHVudGVyMg==", "Authorization: Basic [redacted]"},
		{"short bearer by name", "Authorization: Bearer abc", "Authorization: Bearer [redacted]"},

		{"counts by name", "max_tokens: 5, total_tokens=10", "max_tokens: 5, total_tokens=10"},
		{"cursor by name", "next_page_token=abc", "next_page_token=abc"},
		{"ordinary path", "https://api.example.com/v1/tools/list_issues/sse", "https://api.example.com/v1/tools/list_issues/sse"},
		{"numbers and words in a path", "https://h/repos/toolplane/issues/123456789012345678", "https://h/repos/toolplane/issues/123456789012345678"},
		{"long word in a path", "https://h/docs/internationalization-guide", "https://h/docs/internationalization-guide"},
		{"not a URL", "ratio 3:2//4 and a/b0123456789abcdefgh", "ratio 3:2//4 and a/b0123456789abcdefgh"},
		{"port", "https://h.example:8443/x?page=2", "https://h.example:8443/x?page=2"},
		{"empty value", "password=\ntoken:", "password=\ntoken:"},
		{"a fragment ends a query value only", "x?token=abc#d password=a#b", "x?token=[redacted]#d password=[redacted]"},
		{"name inside a word", "mypassword_hint: shown", "mypassword_hint: shown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, changed := boundary.RedactSecrets(tt.in)
			if got != tt.want || changed != (tt.in != tt.want) {
				t.Fatalf("RedactSecrets(%q) = %q, %v; want %q", tt.in, got, changed, tt.want)
			}
			if again, changed := boundary.RedactSecrets(got); changed || again != got {
				t.Fatalf("not idempotent: %q became %q", got, again)
			}
			// The same rule holds inside an answer and for a value
			// under a name that is not a credential's.
			data, _ := boundary.Apply(map[string]any{"note": tt.in}, boundary.Spec{})
			if got := data.(map[string]any)["note"]; got != tt.want {
				t.Fatalf("Apply kept %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRedactJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"password":"p","note":"ghp_0123456789abcdefghijABCDEFGHIJ012345 x","n":12345678901234567890}`: `{"n":12345678901234567890,"note":"[redacted] x","password":"[redacted]"}`,
		`["db_password=hunter2"]`: `["db_password=[redacted]"]`,
		`{"a":1} trailing`:        `"[redacted]"`,
		`not json`:                `"[redacted]"`,
		``:                        ``,
	} {
		if got := string(boundary.RedactJSON([]byte(in))); got != want {
			t.Errorf("RedactJSON(%s) = %s, want %s", in, got, want)
		}
	}
}

// A value known to be secret (an x-sensitive argument) is hidden wherever
// it was copied to, a key included.
func TestHideReachesKeys(t *testing.T) {
	t.Parallel()
	in := tree(t, `{"echo":{"4111111111111111":"card","note":"paid with 4111111111111111"},"n":1}`)
	got := string(boundary.Encode(nil, boundary.Hide(in, []string{"4111111111111111"})))
	if want := `{"echo":{"[redacted]":"card","note":"[redacted]"},"n":1}`; got != want {
		t.Fatalf("Hide = %s, want %s", got, want)
	}
}

// A secret anywhere in an array is redacted, not only in its first
// element, and the elements before it are kept as they were.
func TestRedactionReachesEveryElement(t *testing.T) {
	t.Parallel()
	in := tree(t, `{"log":["started","then Authorization: Bearer abcdef0123456789 sent",{"token":"t-1"}],"n":[1,2]}`)
	got := string(boundary.Encode(nil, boundary.Redact(in)))
	if strings.Contains(got, "abcdef0123456789") || strings.Contains(got, "t-1") || !strings.Contains(got, `"started"`) || !strings.Contains(got, `"n":[1,2]`) {
		t.Fatalf("Redact = %s; want the second and third elements redacted, the rest kept", got)
	}
}

// Hide ignores an empty value, which every string contains: it would
// otherwise hide everything.
func TestHideIgnoresEmptyValues(t *testing.T) {
	t.Parallel()
	in := tree(t, `{"note":"paid","card":"4111111111111111"}`)
	got := string(boundary.Encode(nil, boundary.Hide(in, []string{"", "4111111111111111"})))
	if want := `{"card":"[redacted]","note":"paid"}`; got != want {
		t.Fatalf("Hide = %s, want %s", got, want)
	}
}
