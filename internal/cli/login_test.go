package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// login saves a context only once the server answered as toolplane and
// authenticated the key; anything else leaves the config file as it was
// and says what failed. --no-verify saves without asking.
func TestLoginVerifiesTheServerAndTheKey(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	dead := freePort(t)
	notToolplane := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v1/tools" {
			fmt.Fprint(w, "<html>hello</html>")
			return
		}
		http.NotFound(w, req)
	}))
	t.Cleanup(notToolplane.Close)
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string // in stdout on success, stderr otherwise
	}{
		{"a key the server refuses", []string{"--server", r.base, "--key", "tpk_wrong"}, 1, "did not accept the key"},
		{"a server that is not there", []string{"--server", dead, "--key", r.admin}, 1, "cannot reach toolplane at " + dead},
		{"a server that answers something else", []string{"--server", notToolplane.URL, "--key", r.admin}, 1, "does not answer as a toolplane server"},
		{"a server without the API", []string{"--server", notFound.URL, "--key", r.admin}, 1, "does not answer as a toolplane server"},
		{"the admin's key", []string{"--server", r.base, "--key", r.admin}, 0, "key accepted"},
		{"an agent's key", []string{"--server", r.base + "/", "--key", r.agent}, 0, "key accepted"},
		{"offline, unchecked", []string{"--server", dead, "--key", "tpk_other", "--no-verify"}, 0, "saved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := t.TempDir()
			code, out, errOut := runIn(map[string]string{"XDG_CONFIG_HOME": cfg}, append([]string{"login"}, tt.args...)...)
			text := out
			if tt.wantCode != 0 {
				text = errOut
			}
			if code != tt.wantCode || !strings.Contains(text, tt.want) {
				t.Fatalf("exit %d, want %d and %q\nstdout: %s\nstderr: %s", code, tt.wantCode, tt.want, out, errOut)
			}
			_, err := os.Stat(filepath.Join(cfg, "toolplane", "config.yaml"))
			if saved := err == nil; saved != (tt.wantCode == 0) {
				t.Errorf("config file saved: %v", saved)
			}
		})
	}
}
