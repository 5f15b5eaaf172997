package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// KEKEnv is the environment variable `toolplane serve` reads
// Config.KEK from: the key-encryption keys connection secrets are sealed
// under (see secret.ParseKeyring).
const KEKEnv = "TOOLPLANE_KEK"

// keyring loads the key-encryption keys: Config.KEK, or Config.KEKFile,
// or, given neither, the key file in the data directory (d.keyFile),
// created with a fresh key at first start. Nodes sharing one database
// must share their keys: a deployment of several nodes sets one of the
// first two on each.
func (s *Server) keyring(d disk) (*secret.Keyring, error) {
	if kek := s.cfg.KEK; kek != "" {
		k, err := secret.LoadKeyring(string(kek), "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KEKEnv, err)
		}
		return k, nil
	}
	if s.cfg.KEKFile == "" {
		created, err := secret.EnsureKeyFile(d.keyFile)
		if err != nil {
			return nil, fmt.Errorf("key-encryption key file: %w", err)
		}
		if created {
			fmt.Fprintf(s.cfg.Stdout, "connection secrets are sealed under the key in %s: back it up; without it they cannot be opened\n", d.keyFile)
		}
	}
	k, err := secret.LoadKeyring("", d.keyFile)
	if err != nil {
		return nil, &ConfigError{Field: "KEKFile", Err: err}
	}
	return k, nil
}

// VaultTokenEnv is the environment variable `toolplane serve` reads
// VaultConfig.Token from: the token toolplane reads Vault with (see
// secret.LoadVaultToken).
const VaultTokenEnv = "TOOLPLANE_VAULT_TOKEN"

// vaultTimeout bounds one read of a secret from Vault: a call waits on
// it, and a Vault that does not answer must not hold calls for long.
const vaultTimeout = 10 * time.Second

// VaultConfig says how a node reaches the Vault (or OpenBao) server that
// connections may keep their secrets in.
type VaultConfig struct {
	// Addr is the server's address, https://vault.example:8200; plain
	// http only to a loopback address. Empty: no Vault.
	Addr string
	// Token is the token toolplane reads with, as TOOLPLANE_VAULT_TOKEN
	// gives it; TokenFile may give it instead, never both. The token
	// needs read access to the entries connections name, and no more.
	Token toolplane.SecretString
	// TokenFile is a file holding the token, on one line, readable by
	// its owner only.
	TokenFile string
	// Namespace, when set, is the Vault Enterprise or OpenBao namespace
	// the entries are in.
	Namespace string
	// CAFile, when set, is a PEM file of the certificate authorities
	// Vault's certificate is checked against, instead of the system's.
	CAFile string
	// CacheTTL is how long a secret read from Vault is used before it is
	// read again: a secret rotated in Vault is used within that long;
	// default connection.DefaultVaultTTL.
	CacheTTL time.Duration
}

// vault answers the client of Config.Vault, nil when none is set.
func (s *Server) vault() (*secret.Vault, error) {
	vc := s.cfg.Vault
	if vc.Addr == "" {
		return nil, nil
	}
	tok, err := secret.LoadVaultToken(string(vc.Token), vc.TokenFile)
	if err != nil {
		return nil, &ConfigError{Field: "Vault.TokenFile", Err: err}
	}
	client := &http.Client{Timeout: vaultTimeout}
	if vc.CAFile != "" {
		pem, err := os.ReadFile(vc.CAFile)
		if err != nil {
			return nil, &ConfigError{Field: "Vault.CAFile", Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{Field: "Vault.CAFile", Err: fmt.Errorf("%s holds no PEM certificate", vc.CAFile)}
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		client.Transport = tr
	}
	v, err := secret.NewVault(secret.VaultConfig{Addr: vc.Addr, Token: tok, Namespace: vc.Namespace, Client: client})
	if err != nil {
		return nil, &ConfigError{Field: "Vault.Addr", Err: err}
	}
	return v, nil
}
