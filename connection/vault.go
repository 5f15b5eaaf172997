package connection

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// DefaultVaultTTL is how long a secret read from Vault is used before it
// is read again (Config.VaultTTL): short, so a secret rotated in Vault
// is used soon, and long enough that a busy connection does not send
// Vault a request per call.
const DefaultVaultTTL = 30 * time.Second

// The bounds of a Vault reference: a mount is a short name, a path a few
// segments.
const (
	maxVaultMount = 128
	maxVaultPath  = 512
)

// checkVaultRef refuses a Vault reference that could name another entry
// than it shows, or that Vault would read another way than written: an
// empty, "." or ".." segment (a leading or trailing '/' makes an empty
// one), "..", or a character outside letters, digits and ._~@+=- (a '%',
// '?' or '#' would be read as an escape, a query or a fragment).
func checkVaultRef(r toolplane.VaultRef) error {
	for _, part := range []struct {
		field, value string
		max          int
	}{{"config.vault.mount", r.Mount, maxVaultMount}, {"config.vault.path", r.Path, maxVaultPath}} {
		bad := func(why string) error { return &InvalidError{Field: part.field, Why: why} }
		switch {
		case part.value == "":
			return bad("is empty")
		case len(part.value) > part.max:
			return bad(fmt.Sprintf("is longer than %d bytes", part.max))
		case strings.HasPrefix(part.value, "/") || strings.HasSuffix(part.value, "/"):
			return bad("starts or ends with '/': name it as Vault's CLI does, secret and crm/api")
		case strings.Contains(part.value, ".."):
			return bad("holds '..'")
		}
		for seg := range strings.SplitSeq(part.value, "/") {
			if seg == "" || seg == "." {
				return bad("has an empty or '.' segment")
			}
			for _, c := range seg {
				if !vaultChar(c) {
					return bad(fmt.Sprintf("holds %q: use letters, digits and ._~@+=- between the '/'", c))
				}
			}
		}
	}
	return nil
}

// vaultChar reports whether c may appear in a Vault reference's segment.
func vaultChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._~@+=-", c)
}

// fetched is what was read from Vault for a connection: its secrets, the
// entry's version, and until when they are used without reading again.
type fetched struct {
	ref     toolplane.VaultRef
	version int
	secrets toolplane.Secrets
	until   time.Time
}

// material answers c's secret material in clear: what is sealed here,
// and, for a connection keeping its secret in Vault, Vault's, beside the
// access token toolplane minted (which is toolplane's, sealed here).
func (s *core) material(ctx context.Context, c *toolplane.Connection) (toolplane.Secrets, error) {
	sealed, err := s.open(c)
	if err != nil || c.Config.Vault == nil {
		return sealed, err
	}
	kept, err := s.fromVault(ctx, c)
	if err != nil {
		return toolplane.Secrets{}, err
	}
	kept.AccessToken, kept.RefreshToken = sealed.AccessToken, sealed.RefreshToken
	return kept, nil
}

// minted is what of sec is sealed here for c: everything, unless c keeps
// its secret in Vault, when only the tokens toolplane was issued.
func minted(c *toolplane.Connection, sec toolplane.Secrets) toolplane.Secrets {
	if c.Config.Vault == nil {
		return sec
	}
	return toolplane.Secrets{AccessToken: sec.AccessToken, RefreshToken: sec.RefreshToken}
}

// fromVault answers the secrets c keeps in Vault: those read less than
// VaultTTL ago, or read now. Concurrent calls through one connection
// share one read. A refusal is a *ConnectionError naming the connection
// and the entry, never the token.
func (s *core) fromVault(ctx context.Context, c *toolplane.Connection) (toolplane.Secrets, error) {
	ref := *c.Config.Vault
	if s.cfg.Vault == nil {
		return toolplane.Secrets{}, &toolplane.ConnectionError{Code: toolplane.CodeUnavailable,
			Message: fmt.Sprintf("connection %s keeps its secret in Vault (%s), and this deployment has no Vault configured; nothing was done. An operator must configure Vault (--vault-addr).", c.ID, ref)}
	}
	if v, ok := s.vaulted.Load(c.ID); ok {
		if f := v.(*fetched); f.ref == ref && s.now().Before(f.until) {
			return f.secrets, nil
		}
	}
	// The read is shared, so no one caller's cancellation ends it for
	// the others; the Vault client's timeout bounds it.
	ch := s.reading.DoChan(c.ID+"\x00"+ref.String(), func() (any, error) {
		return s.readVault(context.WithoutCancel(ctx), c, ref)
	})
	select {
	case <-ctx.Done():
		return toolplane.Secrets{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return toolplane.Secrets{}, r.Err
		}
		return r.Val.(*fetched).secrets, nil
	}
}

// readVault reads c's secrets from the entry ref, keeps them for
// VaultTTL, and answers them.
func (s *core) readVault(ctx context.Context, c *toolplane.Connection, ref toolplane.VaultRef) (*fetched, error) {
	sec, version, err := s.cfg.Vault.ReadSecrets(ctx, ref.Mount, ref.Path)
	if err != nil {
		s.log.WarnContext(ctx, "connection secret not read from Vault", "connection", c.ID, "vault", ref.String(), "err", err)
		return nil, vaultRefusal(c, ref, err)
	}
	// The tokens of an OAuth grant are toolplane's, never Vault's: one
	// found there is not used.
	sec.AccessToken, sec.RefreshToken = "", ""
	if key := needed(c); key != "" && *field(&sec, key) == "" {
		return nil, &toolplane.ConnectionError{Code: toolplane.CodeUnavailable,
			Message: fmt.Sprintf("the secret of connection %s in Vault (%s) holds no %s, which the connection needs; nothing was done. An administrator must write it there.", c.ID, ref, key)}
	}
	f := &fetched{ref: ref, version: version, secrets: sec, until: s.now().Add(s.cfg.VaultTTL)}
	if v, ok := s.vaulted.Load(c.ID); ok && v.(*fetched).version != version {
		s.log.InfoContext(ctx, "connection secret changed in Vault", "connection", c.ID, "vault", ref.String(),
			"version", version, "was", v.(*fetched).version)
	}
	s.vaulted.Store(c.ID, f)
	return f, nil
}

// vaultRefusal answers the refusal of a call whose connection's secret
// could not be read from Vault: connection_expired when the entry is
// gone (someone must write it again), unavailable otherwise (a call may
// be tried again once Vault answers, or lets toolplane read).
func vaultRefusal(c *toolplane.Connection, ref toolplane.VaultRef, err error) error {
	var ve *secret.VaultError
	var ue *url.Error
	unavailable := func(format string, a ...any) error {
		return &toolplane.ConnectionError{Code: toolplane.CodeUnavailable, Message: fmt.Sprintf(format, a...)}
	}
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return &toolplane.ConnectionError{Code: toolplane.CodeConnectionExpired,
			Message: fmt.Sprintf("the secret at %s is gone from Vault, so connection %s cannot be used; nothing was done. Ask an administrator to write it there again.", ref, c.ID)}
	case errors.Is(err, toolplane.ErrForbidden):
		return unavailable("Vault refused toolplane the secret of connection %s at %s (permission denied); nothing was done. An operator must let toolplane's Vault token read it.", c.ID, ref)
	case errors.As(err, &ve):
		return unavailable("Vault answered %d to reading the secret of connection %s at %s; nothing was done. Try again shortly.", ve.Status, c.ID, ref)
	case errors.As(err, &ue):
		return unavailable("Vault could not be reached to read the secret of connection %s at %s; nothing was done. Try again shortly.", c.ID, ref)
	default:
		return unavailable("the secret of connection %s at %s in Vault is not one toolplane reads (string values under token, username, password, dsn, client_secret); nothing was done. An administrator must correct it.", c.ID, ref)
	}
}

// needed answers the key of the secret material c cannot work without,
// "" when it needs none in particular.
func needed(c *toolplane.Connection) string {
	switch {
	case c.Kind != toolplane.ConnectionStatic:
		return ""
	case c.Config.Driver != "":
		return "dsn"
	case c.Config.Auth == toolplane.AuthBasic:
		return "username"
	default:
		return "token"
	}
}

// field answers the field of sec under key, as Vault's entry names it.
func field(sec *toolplane.Secrets, key string) *toolplane.SecretString {
	switch key {
	case "dsn":
		return &sec.DSN
	case "username":
		return &sec.Username
	default:
		return &sec.Token
	}
}
