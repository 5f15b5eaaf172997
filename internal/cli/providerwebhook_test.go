package cli

import (
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/server"
)

// A --provider-webhook names a vendor and its scheme; its secret comes
// from the variable its name gives, and an error names the variable,
// never a secret.
func TestParseProviderWebhook(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TOOLPLANE_PROVIDER_SECRET_FULL_ENRICH": "s3cret", "TOOLPLANE_PROVIDER_SECRET_PAY": "p4y"}
	getenv := func(k string) string { return env[k] }
	for _, tt := range []struct {
		flag string
		want server.ProviderWebhook
		err  string
	}{
		{"full-enrich=body-sha1:10", server.ProviderWebhook{Provider: "full-enrich", Scheme: "body-sha1", Secret: "s3cret", CentsPerCredit: 10}, ""},
		{"pay=timestamped", server.ProviderWebhook{Provider: "pay", Scheme: "timestamped", Secret: "p4y"}, ""},
		{"other=timestamped", server.ProviderWebhook{}, "$TOOLPLANE_PROVIDER_SECRET_OTHER"},
		{"pay", server.ProviderWebhook{}, "NAME=SCHEME"},
		{"pay=body-sha1:ten", server.ProviderWebhook{}, "cents"},
	} {
		got, err := parseProviderWebhook(tt.flag, getenv)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "p4y") {
				t.Errorf("%s: %v, want an error about %s", tt.flag, err, tt.err)
			}
		case err != nil || got != tt.want:
			t.Errorf("%s = %+v, %v; want %+v", tt.flag, got, err, tt.want)
		}
	}
}
