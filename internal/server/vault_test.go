package server

// Vault here is vaulttest.Server, a loopback server imitating Vault's
// documented KV version 2 API: no real Vault could be installed where
// these tests were written.

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/secret/vaulttest"
)

// tokenFile writes a Vault token file of mode in a fresh directory.
func tokenFile(t *testing.T, token string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vault-token")
	if err := os.WriteFile(p, []byte(token+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewRefusesABadVaultConfig(t *testing.T) {
	t.Parallel()
	vs := vaulttest.New(t)
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		vault   func(t *testing.T) VaultConfig
		field   string
		message string
	}{
		{"token file without an address", func(t *testing.T) VaultConfig { return VaultConfig{TokenFile: "/x"} },
			"Vault.TokenFile", "Vault.TokenFile needs Vault.Addr"},
		{"namespace without an address", func(t *testing.T) VaultConfig { return VaultConfig{Namespace: "team"} },
			"Vault.Namespace", "Vault.Namespace needs Vault.Addr"},
		{"negative cache TTL", func(t *testing.T) VaultConfig { return VaultConfig{CacheTTL: -1} },
			"Vault.CacheTTL", "Vault.CacheTTL: -1ns is negative"},
		{"no token", func(t *testing.T) VaultConfig { return VaultConfig{Addr: vs.URL} },
			"Vault.TokenFile", "Vault.TokenFile: "},
		{"token file others read", func(t *testing.T) VaultConfig {
			return VaultConfig{Addr: vs.URL, TokenFile: tokenFile(t, vaulttest.RootToken, 0o644)}
		}, "Vault.TokenFile", "Vault.TokenFile: "},
		{"plain http elsewhere", func(t *testing.T) VaultConfig {
			return VaultConfig{Addr: "http://vault.example:8200", TokenFile: tokenFile(t, vaulttest.RootToken, 0o600)}
		}, "Vault.Addr", "Vault.Addr: "},
		{"CA file without a certificate", func(t *testing.T) VaultConfig {
			return VaultConfig{Addr: vs.URL, TokenFile: tokenFile(t, vaulttest.RootToken, 0o600), CAFile: notPEM}
		}, "Vault.CAFile", "Vault.CAFile: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Addr: "127.0.0.1:0", Database: filepath.Join(t.TempDir(), "toolplane.db"), Vault: tt.vault(t)}
			s, err := New(context.Background(), cfg)
			if err == nil {
				s.Close()
				t.Fatal("New accepted it")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !strings.HasPrefix(err.Error(), tt.message) {
				t.Fatalf("New: %v (%T), want a ConfigError on %s: %s", err, err, tt.field, tt.message)
			}
			if strings.Contains(err.Error(), vaulttest.RootToken) {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
}

// TestConnectionsInVault creates a connection keeping its secret in Vault
// through the REST door: accepted where the node has Vault, refused where
// it has none.
func TestConnectionsInVault(t *testing.T) {
	t.Parallel()
	vs := vaulttest.New(t)
	for _, tc := range []struct {
		name   string
		vault  func(t *testing.T) VaultConfig
		status int
		says   string
	}{
		{"with Vault", func(t *testing.T) VaultConfig {
			return VaultConfig{Addr: vs.URL, TokenFile: tokenFile(t, vaulttest.RootToken, 0o600)}
		}, http.StatusCreated, `"vault":{"mount":"secret","path":"crm/api"}`},
		{"without Vault", func(t *testing.T) VaultConfig { return VaultConfig{} }, http.StatusBadRequest, "this deployment has no Vault"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), Vault: tc.vault(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- s.Run(ctx) }()
			t.Cleanup(func() { stop(); <-ran })
			admin := readCreds(t, dir)["TOOLPLANE_ADMIN_KEY"]
			status, got := post(t, "http://"+s.Addr(), "/v1/connections", admin,
				`{"name":"crm","provider":"crm","kind":"static","config":{"egress":{"hosts":["api.crm.test"]},"vault":{"mount":"secret","path":"crm/api"}}}`)
			if status != tc.status || !strings.Contains(got, tc.says) {
				t.Fatalf("create: %d %s; want %d saying %s", status, got, tc.status, tc.says)
			}
			if strings.Contains(got, vaulttest.RootToken) {
				t.Errorf("the answer shows the Vault token")
			}
		})
	}
}
