package secret

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// NoCAS is the cas of a Put that writes whatever version is stored.
const NoCAS = -1

// maxVaultResponse bounds what is read of one Vault answer: a secret is
// small, and a wrong address must not be read without end.
const maxVaultResponse = 1 << 20

// VaultConfig says how to reach Vault (or OpenBao).
type VaultConfig struct {
	// Addr is the server's address: https://vault.example:8200. Plain
	// http is accepted only on a loopback address (a dev server), since
	// the token travels with every request.
	Addr string
	// Token is sent as X-Vault-Token. It never appears in an error.
	Token toolplane.SecretString
	// Namespace, when set, is sent as X-Vault-Namespace (Vault
	// Enterprise and OpenBao namespaces).
	Namespace string
	// Client carries the requests; its Transport holds the TLS settings
	// (a private CA, a client certificate). Nil means a client with a
	// 30-second timeout. Redirects are followed only to the same scheme
	// and host, so the token is never sent elsewhere.
	Client *http.Client
}

// Vault reads and writes secrets in a KV version 2 secrets engine over
// Vault's HTTP API. It is safe for concurrent use.
type Vault struct {
	base      *url.URL
	token     toolplane.SecretString
	namespace string
	client    *http.Client
}

// VaultError is Vault's refusal of a request: the status and Vault's own
// messages (which hold neither the token nor the secret's values). A 404
// wraps toolplane.ErrNotFound, a 403 toolplane.ErrForbidden, and a 400 to
// a Put with a check-and-set version toolplane.ErrConflict: Vault answers
// a version that did not match with 400 and no other sign.
type VaultError struct {
	Op, Mount, Path string
	Status          int
	Errors          []string
	kind            error
}

func (e *VaultError) Error() string {
	msg := fmt.Sprintf("vault %s %s/%s: %d %s", e.Op, e.Mount, e.Path, e.Status, http.StatusText(e.Status))
	if len(e.Errors) > 0 {
		msg += ": " + strings.Join(e.Errors, "; ")
	}
	return msg
}

// Unwrap answers the error's kind, nil when it has none.
func (e *VaultError) Unwrap() error { return e.kind }

// NewVault answers a client of the server cfg names.
func NewVault(cfg VaultConfig) (*Vault, error) {
	u, err := url.Parse(cfg.Addr)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("%w: vault address %q is not an http(s) URL", toolplane.ErrInvalid, cfg.Addr)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: vault address holds user information, a query or a fragment", toolplane.ErrInvalid)
	}
	if u.Scheme == "http" && !egress.LoopbackHost(u.Hostname()) {
		return nil, fmt.Errorf("%w: vault address %s is plain http to a host that is not loopback: use https", toolplane.ErrInvalid, u.Redacted())
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("%w: no vault token", toolplane.ErrInvalid)
	}
	if strings.ContainsAny(cfg.Token.Reveal(), "\r\n") || strings.ContainsAny(cfg.Namespace, "\r\n") {
		return nil, fmt.Errorf("%w: the vault token or namespace holds a line break", toolplane.ErrInvalid)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	client := &http.Client{Timeout: 30 * time.Second}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	next := client.CheckRedirect
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != u.Scheme || req.URL.Host != u.Host {
			return fmt.Errorf("vault redirected to %s, another server: not followed, the token stays here", req.URL.Redacted())
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("vault redirected 10 times")
		}
		return nil
	}
	return &Vault{base: u, token: cfg.Token, namespace: cfg.Namespace, client: client}, nil
}

// dataURL answers the URL of the entry path under the KV version 2 mount:
// /v1/{mount}/data/{path}, each segment escaped. Empty, "." and ".."
// segments are refused: they would name another entry than asked.
func (v *Vault) dataURL(mount, path string) (string, error) {
	var segs []string
	for i, part := range []string{mount, path} {
		if part == "" {
			return "", fmt.Errorf("%w: vault %s is empty", toolplane.ErrInvalid, [...]string{"mount", "path"}[i])
		}
		for seg := range strings.SplitSeq(part, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return "", fmt.Errorf("%w: vault %s/%s has an empty, . or .. segment", toolplane.ErrInvalid, mount, path)
			}
			segs = append(segs, url.PathEscape(seg))
		}
		if i == 0 {
			segs = append(segs, "data")
		}
	}
	return v.base.String() + "/v1/" + strings.Join(segs, "/"), nil
}

// do sends one request and decodes a 200 answer's JSON into out.
func (v *Vault) do(ctx context.Context, op, method, mount, path string, body any, out any, cas int) error {
	target, err := v.dataURL(mount, path)
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("vault %s %s/%s: %w", op, mount, path, err)
		}
		defer clear(b)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("vault %s %s/%s: %w", op, mount, path, err)
	}
	req.Header.Set("X-Vault-Token", v.token.Reveal())
	req.Header.Set("X-Vault-Request", "true")
	if v.namespace != "" {
		req.Header.Set("X-Vault-Namespace", v.namespace)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := v.client.Do(req)
	if err != nil {
		// A *url.Error names the method and URL, neither of which holds
		// the token.
		return fmt.Errorf("vault %s %s/%s: %w", op, mount, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxVaultResponse+1))
	defer clear(raw)
	if err != nil {
		return fmt.Errorf("vault %s %s/%s: read the answer: %w", op, mount, path, err)
	}
	if len(raw) > maxVaultResponse {
		return fmt.Errorf("vault %s %s/%s: the answer is larger than %d bytes", op, mount, path, maxVaultResponse)
	}
	if resp.StatusCode != http.StatusOK {
		e := &VaultError{Op: op, Mount: mount, Path: path, Status: resp.StatusCode, Errors: vaultErrors(raw)}
		// Vault's messages are shown in errors and logs; one that quotes
		// the token (a proxy in front of Vault echoing the request, say)
		// must not carry it there.
		for i, m := range e.Errors {
			e.Errors[i] = strings.ReplaceAll(m, v.token.Reveal(), "[secret]")
		}
		switch {
		case resp.StatusCode == http.StatusNotFound:
			e.kind = toolplane.ErrNotFound
		case resp.StatusCode == http.StatusForbidden:
			e.kind = toolplane.ErrForbidden
		case resp.StatusCode == http.StatusBadRequest && cas != NoCAS:
			e.kind = toolplane.ErrConflict
		}
		return e
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("vault %s %s/%s: the answer is not KV version 2 JSON", op, mount, path)
	}
	return nil
}

// vaultErrors answers the messages of Vault's {"errors": [...]} body,
// at most three and each cut to 200 bytes: they are shown in errors.
func vaultErrors(raw []byte) []string {
	var body struct {
		Errors []string `json:"errors"`
	}
	if json.Unmarshal(raw, &body) != nil {
		return nil
	}
	out := body.Errors[:min(len(body.Errors), 3)]
	for i, m := range out {
		m = strings.TrimSpace(m)
		if len(m) > 200 {
			m = m[:200] + "…"
		}
		out[i] = m
	}
	return out
}

// kvMetadata is a version's metadata as KV version 2 answers it.
type kvMetadata struct {
	Version      int    `json:"version"`
	DeletionTime string `json:"deletion_time"`
	Destroyed    bool   `json:"destroyed"`
}

// Get answers the newest version of the entry path under the KV version 2
// mount: its keys and values, and its version. An entry that does not
// exist, or whose newest version was deleted or destroyed, answers an
// error wrapping toolplane.ErrNotFound; a token that may not read it,
// toolplane.ErrForbidden. A value that is not a string is refused, naming
// its key.
func (v *Vault) Get(ctx context.Context, mount, path string) (map[string]string, int, error) {
	var out struct {
		Data struct {
			Data     map[string]any `json:"data"`
			Metadata kvMetadata     `json:"metadata"`
		} `json:"data"`
	}
	if err := v.do(ctx, "get", http.MethodGet, mount, path, nil, &out, NoCAS); err != nil {
		return nil, 0, err
	}
	md := out.Data.Metadata
	if out.Data.Data == nil || md.DeletionTime != "" || md.Destroyed {
		return nil, 0, fmt.Errorf("vault get %s/%s: version %d deleted: %w", mount, path, md.Version, toolplane.ErrNotFound)
	}
	data := make(map[string]string, len(out.Data.Data))
	for key, val := range out.Data.Data {
		s, ok := val.(string)
		if !ok {
			return nil, 0, fmt.Errorf("vault get %s/%s: the value of %q is not a string", mount, path, key)
		}
		data[key] = s
	}
	return data, md.Version, nil
}

// Put writes data as a new version of the entry path and answers that
// version. With cas at NoCAS it writes whatever is stored; otherwise only
// when the stored version is cas (0: only when the entry does not exist),
// and a stored version that differs answers an error wrapping
// toolplane.ErrConflict.
func (v *Vault) Put(ctx context.Context, mount, path string, data map[string]string, cas int) (int, error) {
	if cas < NoCAS {
		return 0, fmt.Errorf("%w: vault check-and-set version %d", toolplane.ErrInvalid, cas)
	}
	body := struct {
		Options *struct {
			CAS int `json:"cas"`
		} `json:"options,omitempty"`
		Data map[string]string `json:"data"`
	}{Data: data}
	if cas != NoCAS {
		body.Options = &struct {
			CAS int `json:"cas"`
		}{cas}
	}
	var out struct {
		Data kvMetadata `json:"data"`
	}
	if err := v.do(ctx, "put", http.MethodPost, mount, path, body, &out, cas); err != nil {
		return 0, err
	}
	return out.Data.Version, nil
}

// The keys of a Vault entry holding a connection's secrets, one for each
// field of toolplane.Secrets.
var secretKeys = []string{"token", "username", "password", "dsn", "client_secret", "access_token", "refresh_token"}

// secretFields answers s's fields in the order of secretKeys.
func secretFields(s *toolplane.Secrets) []*toolplane.SecretString {
	return []*toolplane.SecretString{&s.Token, &s.Username, &s.Password, &s.DSN, &s.ClientSecret, &s.AccessToken, &s.RefreshToken}
}

// ReadSecrets reads a connection's secrets kept in Vault: the entry's
// keys token, username, password, dsn, client_secret, access_token and
// refresh_token; other keys are left alone. It answers the entry's
// version, for a WriteSecrets that must not overwrite a newer one.
func (v *Vault) ReadSecrets(ctx context.Context, mount, path string) (toolplane.Secrets, int, error) {
	data, version, err := v.Get(ctx, mount, path)
	if err != nil {
		return toolplane.Secrets{}, 0, err
	}
	var s toolplane.Secrets
	for i, f := range secretFields(&s) {
		*f = toolplane.SecretString(data[secretKeys[i]])
	}
	return s, version, nil
}

// WriteSecrets writes a connection's secrets to Vault under the keys
// ReadSecrets reads, empty fields left out, as Put does with cas: an OAuth
// connection's refreshed tokens, written back where they are kept.
func (v *Vault) WriteSecrets(ctx context.Context, mount, path string, s toolplane.Secrets, cas int) (int, error) {
	data := map[string]string{}
	for i, f := range secretFields(&s) {
		if *f != "" {
			data[secretKeys[i]] = f.Reveal()
		}
	}
	return v.Put(ctx, mount, path, data, cas)
}

// maxTokenFile bounds what is read of a Vault token file: a token is a
// line, and a wrong path (a device, a log) must not be read whole.
const maxTokenFile = 4096

// LoadVaultToken answers the token toolplane reads Vault with: env, the
// value of TOOLPLANE_VAULT_TOKEN, when it is set, otherwise the one line
// of the file at path, which must be readable by its owner only (mode
// 0600), as a key file. Setting both, or neither, is refused. No error
// shows the token, or any of the file's text.
func LoadVaultToken(env, path string) (toolplane.SecretString, error) {
	return LoadToken("TOOLPLANE_VAULT_TOKEN", "vault token", env, path)
}

// LoadToken answers a credential the server presents to a service the
// operator configured: env, the value of the environment variable envName,
// when it is set, otherwise the one line of the file at path, which must
// be readable by its owner only (mode 0600), as a key file. Setting both,
// or neither, is refused; what names the credential in the refusals. No
// error shows the token, or any of the file's text.
func LoadToken(envName, what, env, path string) (toolplane.SecretString, error) {
	env = strings.TrimSpace(env)
	switch {
	case env != "" && path != "":
		return "", fmt.Errorf("%w: both %s and a %s file (%s) are given: keep one", toolplane.ErrInvalid, envName, what, path)
	case env != "":
		if strings.ContainsAny(env, "\r\n") {
			return "", fmt.Errorf("%w: %s holds a line break", toolplane.ErrInvalid, envName)
		}
		return toolplane.SecretString(env), nil
	case path == "":
		return "", fmt.Errorf("%w: no %s: set %s or name a %s file", toolplane.ErrInvalid, what, envName, what)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s file: %w", what, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s file: %w", what, err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s file %s is not a regular file", toolplane.ErrInvalid, what, path)
	}
	if err := checkPrivate(toolplane.ErrInvalid, what+" file", path, uint32(info.Mode().Perm())); err != nil {
		return "", err
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	defer clear(raw)
	if err != nil {
		return "", fmt.Errorf("%s file %s: %w", what, path, err)
	}
	if len(raw) > maxTokenFile {
		return "", fmt.Errorf("%w: %s file %s is larger than %d bytes: it holds one token", toolplane.ErrInvalid, what, path, maxTokenFile)
	}
	tok := strings.TrimSpace(string(raw))
	switch {
	case tok == "":
		return "", fmt.Errorf("%w: %s file %s is empty", toolplane.ErrInvalid, what, path)
	case strings.ContainsAny(tok, "\r\n"):
		return "", fmt.Errorf("%w: %s file %s holds more than one line: it holds one token", toolplane.ErrInvalid, what, path)
	}
	return toolplane.SecretString(tok), nil
}
