package secret_test

// The Vault tests run the client against vaulttest.Server, a loopback
// server IMITATING THE DOCUMENTED KV VERSION 2 API (see that package); it
// is not a real Vault or OpenBao. TestVaultDevServer runs the same checks
// against a real dev server when a bao or vault binary is on PATH, and is
// skipped otherwise.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/secret/vaulttest"
)

// The tokens the tests use: the imitation's, which a dev server is
// started with too.
const (
	testToken  = vaulttest.RootToken
	readerOnly = vaulttest.ReaderToken
)

// vaultFor answers a client of addr with token.
func vaultFor(t *testing.T, addr, token string) *secret.Vault {
	t.Helper()
	v, err := secret.NewVault(secret.VaultConfig{Addr: addr, Token: toolplane.SecretString(token)})
	if err != nil {
		t.Fatalf("NewVault: %v", err)
	}
	return v
}

// checkKV holds a KV version 2 server, reproduced or real, to what the
// client promises. root may write and read; reader may only read (nil
// when the server has no such token).
func checkKV(t *testing.T, root, reader *secret.Vault, prefix string) {
	ctx := t.Context()
	path := prefix + "/connections/con_1"
	noToken := func(err error) {
		t.Helper()
		if err != nil && (strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), readerOnly)) {
			t.Errorf("error %q shows the token", err)
		}
	}

	_, _, err := root.Get(ctx, "secret", path)
	noToken(err)
	if !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("Get of a missing entry = %v, want ErrNotFound", err)
	}
	v1, err := root.Put(ctx, "secret", path, map[string]string{"token": "tok-1", "note": "x"}, 0)
	if err != nil || v1 != 1 {
		t.Fatalf("Put (cas 0) = %d, %v; want version 1", v1, err)
	}
	_, err = root.Put(ctx, "secret", path, map[string]string{"token": "lost"}, 0)
	noToken(err)
	var ve *secret.VaultError
	if !errors.Is(err, toolplane.ErrConflict) || !errors.As(err, &ve) || ve.Status != http.StatusBadRequest {
		t.Fatalf("Put (cas 0) over an existing entry = %v, want ErrConflict", err)
	}
	data, version, err := root.Get(ctx, "secret", path)
	if err != nil || version != 1 || data["token"] != "tok-1" || data["note"] != "x" || len(data) != 2 {
		t.Fatalf("Get = %v, %d, %v", len(data), version, err)
	}
	s, version, err := root.ReadSecrets(ctx, "secret", path)
	if err != nil || version != 1 || s.Token.Reveal() != "tok-1" || s.RefreshToken != "" {
		t.Fatalf("ReadSecrets = version %d, %v", version, err)
	}
	s.AccessToken, s.RefreshToken = "at-2", "rt-2"
	v2, err := root.WriteSecrets(ctx, "secret", path, s, version)
	if err != nil || v2 != 2 {
		t.Fatalf("WriteSecrets (cas 1) = %d, %v; want version 2", v2, err)
	}
	if _, err := root.WriteSecrets(ctx, "secret", path, s, version); !errors.Is(err, toolplane.ErrConflict) {
		t.Fatalf("WriteSecrets with a stale version = %v, want ErrConflict", err)
	}
	got, version, err := root.ReadSecrets(ctx, "secret", path)
	if err != nil || version != 2 || got != s {
		t.Fatalf("ReadSecrets after write = version %d, %v, equal %v", version, err, got == s)
	}
	v3, err := root.Put(ctx, "secret", path, map[string]string{"token": "tok-3"}, secret.NoCAS)
	if err != nil || v3 != 3 {
		t.Fatalf("Put without cas = %d, %v; want version 3", v3, err)
	}
	// Segments needing escapes reach the same entry both ways.
	odd := prefix + "/a b/ü%2F"
	if _, err := root.Put(ctx, "secret", odd, map[string]string{"k": "v"}, 0); err != nil {
		t.Fatalf("Put %q: %v", odd, err)
	}
	if data, _, err := root.Get(ctx, "secret", odd); err != nil || data["k"] != "v" {
		t.Fatalf("Get %q = %v", odd, err)
	}

	if reader != nil {
		if _, v, err := reader.Get(ctx, "secret", path); err != nil || v != 3 {
			t.Errorf("reader Get = %d, %v", v, err)
		}
		_, err := reader.Put(ctx, "secret", path, map[string]string{"token": "x"}, secret.NoCAS)
		noToken(err)
		if !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("reader Put = %v, want ErrForbidden", err)
		}
	}
}

func TestVault(t *testing.T) {
	t.Parallel()
	srv := vaulttest.New(t)
	checkKV(t, vaultFor(t, srv.URL, testToken), vaultFor(t, srv.URL, readerOnly), "app")
}

func TestVaultRefusals(t *testing.T) {
	t.Parallel()
	srv := vaulttest.New(t)
	ctx := t.Context()
	root := vaultFor(t, srv.URL, testToken)

	wrong := vaultFor(t, srv.URL, "hvs.wrong-token-0001")
	_, _, err := wrong.Get(ctx, "secret", "x")
	if !errors.Is(err, toolplane.ErrForbidden) {
		t.Errorf("Get with a wrong token = %v, want ErrForbidden", err)
	}
	if err != nil && (!strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "hvs.wrong")) {
		t.Errorf("error %q: want Vault's message and never the token", err)
	}

	// A deleted newest version is not found.
	if _, err := root.Put(ctx, "secret", "gone", map[string]string{"token": "t"}, secret.NoCAS); err != nil {
		t.Fatal(err)
	}
	srv.Delete("gone")
	if _, _, err := root.Get(ctx, "secret", "gone"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("Get of a deleted version = %v, want ErrNotFound", err)
	}

	// A value that is not a string is refused by its key, not shown.
	srv.Put("num", map[string]any{"port": 5432.0, "token": "tok-num"})
	_, _, err = root.Get(ctx, "secret", "num")
	if err == nil || !strings.Contains(err.Error(), `"port"`) || strings.Contains(err.Error(), "5432") {
		t.Errorf("Get of a number = %v, want a refusal naming the key", err)
	}

	for _, p := range [][2]string{{"", "x"}, {"secret", ""}, {"secret", "a//b"}, {"secret", "../sys/x"}, {"secret", "a/./b"}, {"secret/", "x"}} {
		if _, _, err := root.Get(ctx, p[0], p[1]); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("Get(%q, %q) = %v, want ErrInvalid", p[0], p[1], err)
		}
	}
	if _, err := root.Put(ctx, "secret", "x", nil, -2); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("Put with cas -2 = %v, want ErrInvalid", err)
	}

	// A 400 without a cas is no conflict.
	_, err = root.Put(ctx, "secret", "x", nil, secret.NoCAS)
	var ve *secret.VaultError
	if !errors.As(err, &ve) || errors.Is(err, toolplane.ErrConflict) {
		t.Errorf("Put of no data = %v, want a VaultError that is no conflict", err)
	}
}

func TestVaultNamespace(t *testing.T) {
	t.Parallel()
	srv := vaulttest.New(t)
	v, err := secret.NewVault(secret.VaultConfig{Addr: srv.URL + "/", Token: testToken, Namespace: "team-a/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Put(t.Context(), "secret", "x", map[string]string{"k": "v"}, secret.NoCAS); err != nil {
		t.Fatal(err)
	}
	if ns := srv.Namespaces(); len(ns) != 1 || ns[0] != "team-a/" {
		t.Errorf("namespaces sent %v, want [team-a/]", ns)
	}
}

func TestVaultRedirectElsewhere(t *testing.T) {
	t.Parallel()
	var leaked sync.Map
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store("token", r.Header.Get("X-Vault-Token"))
		http.Error(w, `{"errors":[]}`, http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	// The same address by another name is another server to a client.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	_, _, err := vaultFor(t, redirector.URL, testToken).Get(t.Context(), "secret", "x")
	if err == nil || errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("Get through a redirect to another server = %v, want it refused", err)
	}
	if tok, ok := leaked.Load("token"); ok {
		t.Errorf("the token reached the other server (%d bytes)", len(tok.(string)))
	}
}

func TestVaultErrorHidesAnEchoedToken(t *testing.T) {
	t.Parallel()
	// A server (or a proxy before it) quoting the request's token in its
	// refusal: the error shows its message, never the token.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"errors":["token %s is not allowed here"]}`, r.Header.Get("X-Vault-Token"))
	}))
	t.Cleanup(echo.Close)
	_, _, err := vaultFor(t, echo.URL, testToken).Get(t.Context(), "secret", "x")
	if !errors.Is(err, toolplane.ErrForbidden) || !strings.Contains(err.Error(), "is not allowed here") {
		t.Fatalf("Get = %v, want ErrForbidden with the server's message", err)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Errorf("error %q shows the token", err)
	}
}

func TestNewVault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   secret.VaultConfig
		valid bool
	}{
		{name: "https", cfg: secret.VaultConfig{Addr: "https://vault.example:8200", Token: "t"}, valid: true},
		{name: "http loopback", cfg: secret.VaultConfig{Addr: "http://127.0.0.1:8200", Token: "t"}, valid: true},
		{name: "http localhost", cfg: secret.VaultConfig{Addr: "http://localhost:8200", Token: "t"}, valid: true},
		{name: "http ipv6 loopback", cfg: secret.VaultConfig{Addr: "http://[::1]:8200", Token: "t"}, valid: true},
		{name: "http elsewhere", cfg: secret.VaultConfig{Addr: "http://vault.example:8200", Token: "t"}},
		{name: "no token", cfg: secret.VaultConfig{Addr: "https://vault.example"}},
		{name: "token with a line break", cfg: secret.VaultConfig{Addr: "https://vault.example", Token: "t\r\nX-Evil: 1"}},
		{name: "no scheme", cfg: secret.VaultConfig{Addr: "vault.example:8200", Token: "t"}},
		{name: "user info", cfg: secret.VaultConfig{Addr: "https://u:p@vault.example", Token: "t"}},
		{name: "query", cfg: secret.VaultConfig{Addr: "https://vault.example/?x=1", Token: "t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := secret.NewVault(tt.cfg)
			if tt.valid != (err == nil) {
				t.Errorf("NewVault = %v, want valid %v", err, tt.valid)
			}
			if err != nil && !errors.Is(err, toolplane.ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if err != nil && strings.Contains(err.Error(), "X-Evil") {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
}

// TestVaultDevServer runs checkKV against a real dev server: OpenBao's
// bao, or vault, whichever is on PATH.
func TestVaultDevServer(t *testing.T) {
	t.Parallel()
	bin := ""
	for _, name := range []string{"bao", "vault"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("neither bao (OpenBao) nor vault is on PATH: the real-server check is skipped; TestVault covers the documented API")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "server", "-dev", "-dev-root-token-id="+testToken, "-dev-listen-address="+addr)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	root := vaultFor(t, "http://"+addr, testToken)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		// The dev server mounts KV version 2 at secret/; a missing entry
		// answers not found once it serves.
		_, _, err := root.Get(ctx, "secret", "ready")
		if errors.Is(err, toolplane.ErrNotFound) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s dev server not ready: %v\n%s", bin, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkKV(t, root, nil, fmt.Sprintf("t%d", time.Now().UnixNano()))
}

func TestLoadVaultToken(t *testing.T) {
	t.Parallel()
	const tok = "hvs.loaded-token-5e1d"
	file := func(text string, mode os.FileMode) func(t *testing.T) string {
		return func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "vault-token")
			if err := os.WriteFile(p, []byte(text), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	none := func(*testing.T) string { return "" }
	tests := []struct {
		name string
		env  string
		path func(*testing.T) string
		ok   bool
	}{
		{name: "env", env: " " + tok + "\n", path: none, ok: true},
		{name: "file", path: file(tok+"\n", 0o600), ok: true},
		{name: "both", env: tok, path: file(tok, 0o600)},
		{name: "neither", path: none},
		{name: "env with two lines", env: tok + "\nX-Evil: " + tok, path: none},
		{name: "file readable by others", path: file(tok, 0o644)},
		{name: "empty file", path: file("\n", 0o600)},
		{name: "file of two lines", path: file(tok+"\n"+tok+"\n", 0o600)},
		{name: "file too large", path: file(strings.Repeat(tok, 1000), 0o600)},
		{name: "missing file", path: func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent") }},
		{name: "a directory", path: func(t *testing.T) string { return t.TempDir() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := secret.LoadVaultToken(tt.env, tt.path(t))
			if tt.ok {
				if err != nil || got.Reveal() != tok {
					t.Fatalf("LoadVaultToken = %v; want the token", err)
				}
				return
			}
			if err == nil {
				t.Fatal("LoadVaultToken accepted it")
			}
			if strings.Contains(err.Error(), "loaded-token") {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
}
