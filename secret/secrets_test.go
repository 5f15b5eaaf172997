package secret_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

func TestSealSecrets(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1")
	full := toolplane.Secrets{
		Token: "tok-1", Username: "alice", Password: "p@ss word", DSN: "postgres://u:p@db/x",
		ClientSecret: "cs-2", AccessToken: "at-3", RefreshToken: "rt-4",
	}
	tests := []struct {
		name string
		s    toolplane.Secrets
	}{
		{name: "every field", s: full},
		{name: "token only", s: toolplane.Secrets{Token: "sk_live_x"}},
		{name: "none", s: toolplane.Secrets{}},
		{name: "unicode and quotes", s: toolplane.Secrets{Password: "\"}\\u0000é\x00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sealed, err := secret.SealSecrets(k, "org_a", "con_1", tt.s)
			if err != nil {
				t.Fatalf("SealSecrets: %v", err)
			}
			got, err := secret.OpenSecrets(k, "org_a", "con_1", sealed)
			if err != nil {
				t.Fatalf("OpenSecrets: %v", err)
			}
			if got != tt.s {
				t.Errorf("OpenSecrets answered other values than were sealed")
			}
			// The sealed plaintext holds the values, never the placeholder.
			plain, err := k.Open(sealed, secret.ConnectionAAD("org_a", "con_1"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(plain, []byte("[secret]")) {
				t.Errorf("sealed the placeholder instead of the values")
			}
		})
	}

	sealed, err := secret.SealSecrets(k, "org_a", "con_1", full)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range [][2]string{{"org_a", "con_2"}, {"org_b", "con_1"}} {
		_, err := secret.OpenSecrets(k, row[0], row[1], sealed)
		if !errors.Is(err, secret.ErrAuthentication) {
			t.Errorf("OpenSecrets for %s/%s = %v, want ErrAuthentication", row[0], row[1], err)
		}
		if msg := fmt.Sprint(err); bytes.Contains([]byte(msg), []byte("tok-1")) {
			t.Errorf("error %q shows a secret", msg)
		}
	}
	if _, err := secret.OpenSecrets(ring(t, "k9"), "org_a", "con_1", sealed); !errors.Is(err, secret.ErrUnknownKey) {
		t.Errorf("OpenSecrets without the key = %v, want ErrUnknownKey", err)
	}
}

func TestOpenSecretsEmpty(t *testing.T) {
	t.Parallel()
	got, err := secret.OpenSecrets(ring(t, "k1"), "org_a", "con_1", nil)
	if err != nil || got != (toolplane.Secrets{}) {
		t.Errorf("OpenSecrets of no secret = %v, %v; want empty", got, err)
	}
}

func TestSecretsRowRefused(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1")
	// "a/b" + "/" + "c" and "a" + "/" + "b/c" would share additional
	// data; neither is an identifier the platform makes.
	for _, row := range [][2]string{{"a/b", "c"}, {"a", "b/c"}, {"", "c"}, {"a", ""}} {
		if _, err := secret.SealSecrets(k, row[0], row[1], toolplane.Secrets{Token: "t"}); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("SealSecrets(%q, %q) = %v, want ErrInvalid", row[0], row[1], err)
		}
		if _, err := secret.OpenSecrets(k, row[0], row[1], []byte{1}); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("OpenSecrets(%q, %q) = %v, want ErrInvalid", row[0], row[1], err)
		}
	}
}

func TestOpenSecretsNotAnObject(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1")
	for _, plain := range []string{"not json", `["tok"]`, `{"token": 5}`} {
		sealed, err := k.Seal([]byte(plain), secret.ConnectionAAD("org_a", "con_1"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = secret.OpenSecrets(k, "org_a", "con_1", sealed)
		if !errors.Is(err, secret.ErrMalformed) {
			t.Errorf("OpenSecrets of %q = %v, want ErrMalformed", plain, err)
		}
	}
	// A field a later version adds is ignored, not refused.
	sealed, err := k.Seal([]byte(`{"token":"t","later":"x"}`), secret.ConnectionAAD("org_a", "con_1"))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := secret.OpenSecrets(k, "org_a", "con_1", sealed); err != nil || s.Token.Reveal() != "t" {
		t.Errorf("OpenSecrets with an unknown field = %v", err)
	}
}

func TestVerifier(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1")
	sealed, err := secret.SealVerifier(k, "st_1", "verifier-43-characters-long-xxxxxxxxxxxxxxx")
	if err != nil {
		t.Fatal(err)
	}
	got, err := secret.OpenVerifier(k, "st_1", sealed)
	if err != nil || got.Reveal() != "verifier-43-characters-long-xxxxxxxxxxxxxxx" {
		t.Fatalf("OpenVerifier = %v", err)
	}
	if _, err := secret.OpenVerifier(k, "st_2", sealed); !errors.Is(err, secret.ErrAuthentication) {
		t.Errorf("OpenVerifier for another state = %v, want ErrAuthentication", err)
	}
	// A state's verifier is not a connection's secret: the organization
	// whose connections would share its additional data is refused.
	if _, err := secret.OpenSecrets(k, "oauth-state", "st_1", sealed); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("OpenSecrets of a verifier = %v, want ErrInvalid", err)
	}
	if _, err := secret.SealSecrets(k, "oauth-state", "st_1", toolplane.Secrets{}); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("SealSecrets for organization oauth-state = %v, want ErrInvalid", err)
	}
}

func TestSecretsNeverMarshalled(t *testing.T) {
	t.Parallel()
	// Sealing must not go through SecretString's JSON, which writes the
	// placeholder: this guards the premise the private struct rests on.
	b, err := json.Marshal(toolplane.Secrets{Token: "s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("s3cr3t")) {
		t.Fatalf("toolplane.Secrets marshals its values: %s", b)
	}
}
