package connection

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// checkBaseURL refuses a base URL an HTTP tool's path could not be sent
// under: it is an absolute http(s) URL with a host, and nothing a path
// would be appended after or that would carry a secret (a user, a query,
// a fragment).
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		return fmt.Errorf("%q is not an absolute http or https URL (http://127.0.0.1:9090, https://api.example.com/v2)", raw)
	case u.User != nil:
		return fmt.Errorf("%q carries user information; the connection's secret is its credential", raw)
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#"):
		return fmt.Errorf("%q has a query or a fragment; a tool's path and query are added to it", raw)
	}
	return nil
}

// check refuses a connection that could not work, before anything is
// stored.
func check(in Input) error {
	bad := func(field, format string, a ...any) error {
		return &InvalidError{Field: field, Why: fmt.Sprintf(format, a...)}
	}
	if !names.MatchString(in.Name) {
		return bad("name", "%q: use lower-case letters, digits, '.', '_' and '-', at most 63", in.Name)
	}
	if !names.MatchString(in.Provider) {
		return bad("provider", "%q: use lower-case letters, digits, '.', '_' and '-', at most 63", in.Provider)
	}
	cfg, sec := in.Config, in.Secrets
	if err := checkEgress(cfg.Egress); err != nil {
		return err
	}
	// A connection keeping its secret in Vault is given none here: Vault
	// is where it is read, so one given here would be kept nowhere.
	vault := cfg.Vault != nil
	if vault {
		if err := checkVaultRef(*cfg.Vault); err != nil {
			return err
		}
		if in.Kind == toolplane.ConnectionAuthorizationCode {
			return bad("config.vault", "an authorization-code connection's tokens are issued to toolplane and kept here; keep a static or client credentials connection's secret in Vault")
		}
		if sec != (toolplane.Secrets{}) {
			return bad("secrets", "a connection keeping its secret in Vault (config.vault) takes no secrets here: write them to %s", cfg.Vault)
		}
	}
	if cfg.BaseURL != "" {
		if cfg.Driver != "" {
			return bad("config.base_url", "a SQL connection reaches its database by its connection string; base_url is an HTTP connection's")
		}
		if err := checkBaseURL(cfg.BaseURL); err != nil {
			return bad("config.base_url", "%v", err)
		}
	}
	if cfg.AllowPrivilegedRole && cfg.Driver == "" {
		return bad("config.allow_privileged_role", "only a SQL connection (config.driver) logs in as a database role")
	}
	switch in.Kind {
	case toolplane.ConnectionStatic:
		if cfg.Driver != "" {
			if !slices.Contains([]string{"postgres", "sqlite", "mysql"}, cfg.Driver) {
				return bad("config.driver", "%q: use postgres, sqlite or mysql", cfg.Driver)
			}
			if sec.DSN == "" && !vault {
				return bad("secrets.dsn", "a SQL connection needs its connection string")
			}
			return nil
		}
		switch cfg.Auth {
		case "", toolplane.AuthBearer:
			if sec.Token == "" && !vault {
				return bad("secrets.token", "a bearer connection needs its token")
			}
		case toolplane.AuthHeader:
			if !validHeader(cfg.Header) {
				return bad("config.header", "%q is not a header name", cfg.Header)
			}
			if sec.Token == "" && !vault {
				return bad("secrets.token", "a header connection needs its key")
			}
		case toolplane.AuthBasic:
			if sec.Username == "" && !vault {
				return bad("secrets.username", "a basic connection needs a user name")
			}
		default:
			return bad("config.auth", "%q: use bearer, basic or header", cfg.Auth)
		}
	case toolplane.ConnectionClientCredentials, toolplane.ConnectionAuthorizationCode:
		if cfg.ClientID == "" {
			return bad("config.client_id", "an OAuth connection needs its client id")
		}
		if cfg.Issuer == "" && (cfg.TokenURL == "" || in.Kind == toolplane.ConnectionAuthorizationCode && cfg.AuthorizeURL == "") {
			return bad("config", "name the provider's issuer (its endpoints are discovered) or its authorize_url and token_url")
		}
		if cfg.Driver != "" {
			return bad("config.driver", "an OAuth connection is not a database's")
		}
	default:
		return bad("kind", "%q: use static, oauth2_client_credentials or oauth2_authorization_code", in.Kind)
	}
	return nil
}

// validHeader reports whether name is an HTTP header name (an RFC 9110
// token).
func validHeader(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// checkEgress refuses rules that do not compile.
func checkEgress(r toolplane.EgressRules) error {
	if _, err := egress.Compile(r); err != nil {
		return &InvalidError{Field: "config.egress", Why: err.Error()}
	}
	return nil
}
