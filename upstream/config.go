// Package upstream connects toolplane to other MCP servers and serves their
// tools through the one invocation path. Each server is a connection (a
// stdio command or a Streamable HTTP URL); its tools are ingested into the
// registry as mcp.<slug>.<remote name> with restrictive defaults (a
// destructive write that needs a person's approval) until the owner relaxes
// them in configuration, because a remote server's own hints are claims
// toolplane has no way to check. The tool list is synchronised on connect,
// when the server announces a change, on a timer and when a call meets a
// tool the server no longer knows: a tool dropped upstream answers
// tool_unavailable before anything is decided, and a changed contract gets
// a new version, so a run shown the old one answers tool_changed.
package upstream

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
)

// Config describes one upstream MCP server.
type Config struct {
	// Slug names the connection: its tools are mcp.<slug>.<remote name>,
	// and its governed copy is served at /mcp/<slug>.
	Slug string `yaml:"slug"`
	// Command starts a server that speaks MCP over stdin and stdout.
	Command []string `yaml:"command,omitempty"`
	// Env is added to the command's environment. A value may name
	// variables of toolplane's own environment as ${NAME}: a secret is
	// given to the server without being written in the file.
	Env map[string]string `yaml:"env,omitempty"`
	// URL is a Streamable HTTP endpoint.
	URL string `yaml:"url,omitempty"`
	// Headers are sent with every request to URL (an Authorization header,
	// say); values expand ${NAME} like Env. The model never sees them.
	// With Connection, they authorize only what toolplane does on its own
	// account: connecting to list the tools and follow their changes.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Connection names the connection provider (an
	// oauth2_authorization_code one, typically) whose connections
	// authorize calls to a URL server that needs OAuth. Every tool of the
	// server then declares it, the broker releases the connection of the
	// person a call is made for, and the call goes out with that
	// connection's access token as its bearer token, on a session of that
	// token alone: no call ever carries another person's token, nor the
	// Headers' credential.
	Connection string `yaml:"connection,omitempty"`
	// Owner is recorded on every ingested tool.
	Owner string `yaml:"owner,omitempty"`
	// Timeout bounds each call; zero is the platform default.
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Tools relax the restrictive defaults, by remote tool name.
	Tools map[string]Relax `yaml:"tools,omitempty"`
}

// Relax is an owner's statement about one remote tool, replacing the
// restrictive default for each field it sets.
type Relax struct {
	// Effect is read, write or send (default write).
	Effect toolplane.Effect `yaml:"effect,omitempty" json:"effect,omitempty"`
	// Destructive defaults to true for a write or send.
	Destructive *bool `yaml:"destructive,omitempty" json:"destructive,omitempty"`
	// RequiresApproval defaults to true.
	RequiresApproval *bool `yaml:"requires_approval,omitempty" json:"requires_approval,omitempty"`
	// IdempotentDownstream states that the server makes one effect of
	// repeated calls carrying the same idempotency key, which toolplane
	// sends with every call in _meta ("toolplane/idempotency_key"). A write
	// or send whose outcome is unknown (a timeout, a lost worker) may then
	// run again with the same key, up to MaxAttempts starts in all, instead
	// of waiting as an uncertain action for a person. Without it, repeating
	// such a call could double its effect, so it is never repeated.
	IdempotentDownstream bool `yaml:"idempotent_downstream,omitempty" json:"idempotent_downstream,omitempty"`
	// MaxAttempts bounds the starts of a tool with IdempotentDownstream;
	// default DefaultMaxAttempts.
	MaxAttempts int `yaml:"max_attempts,omitempty" json:"max_attempts,omitempty"`
}

// DefaultMaxAttempts is how many starts a tool whose server honours the
// idempotency key is allowed when its owner does not say.
const DefaultMaxAttempts = 3

// maxMaxAttempts matches the registry's bound on replay attempts.
const maxMaxAttempts = 100

// File is the upstreams file `toolplane serve --upstreams` reads.
type File struct {
	Upstreams []Config `yaml:"upstreams"`
}

// ErrConfig marks a configuration that cannot be served, or a runtime
// setting that would make one. It is a toolplane.ErrInvalid.
var ErrConfig = toolplane.Refine(toolplane.ErrInvalid, "upstream configuration")

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// providerRE is the grammar of a connection provider named by Connection.
var providerRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ReadFile reads and checks an upstreams file (YAML or JSON). Unknown
// fields are errors: a misspelt relaxation must not leave a tool at
// defaults its owner believes changed, nor the reverse.
func ReadFile(path string) ([]Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	if err := Check(f.Upstreams); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Upstreams, nil
}

// ParseFlag reads the short form slug=URL or slug=COMMAND ARGS... (words
// split on spaces) given on the command line.
func ParseFlag(v string) (Config, error) {
	slug, target, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(target) == "" {
		return Config{}, fmt.Errorf("%w: %q is not slug=URL or slug=COMMAND", ErrConfig, v)
	}
	c := Config{Slug: strings.TrimSpace(slug)}
	target = strings.TrimSpace(target)
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		c.URL = target
	} else {
		c.Command = strings.Fields(target)
	}
	return c, Check([]Config{c})
}

// Check reports every problem of a set of configurations.
func Check(cs []Config) error {
	var problems []string
	seen := map[string]bool{}
	for i, c := range cs {
		where := fmt.Sprintf("upstream %d (%s)", i+1, c.Slug)
		if !slugRE.MatchString(c.Slug) {
			problems = append(problems, where+": slug must be lowercase letters, digits, '_' or '-', at most 40, starting with a letter or digit")
		}
		if seen[c.Slug] {
			problems = append(problems, where+": slug used twice")
		}
		seen[c.Slug] = true
		switch {
		case len(c.Command) > 0 && c.URL != "":
			problems = append(problems, where+": give a command or a url, not both")
		case len(c.Command) == 0 && c.URL == "":
			problems = append(problems, where+": give a command (stdio) or a url (Streamable HTTP)")
		case c.URL != "":
			u, err := url.Parse(c.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				problems = append(problems, where+": url must be an http or https URL")
			}
		}
		if len(c.Headers) > 0 && c.URL == "" {
			problems = append(problems, where+": headers apply to a url upstream only")
		}
		if c.Connection != "" && len(c.Command) > 0 {
			problems = append(problems, where+": connection applies to a url upstream only: a stdio server is not called over HTTP, so there is no request to carry a token")
		}
		if c.Connection != "" && !providerRE.MatchString(c.Connection) {
			problems = append(problems, where+": connection must name a provider: lowercase letters, digits, '.', '_' or '-', at most 63")
		}
		if c.Timeout < 0 {
			problems = append(problems, where+": timeout is negative")
		}
		for name, r := range c.Tools {
			problems = append(problems, checkRelax(where+": tools."+name, r)...)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
	}
	return nil
}

// checkRelax reports the problems of one tool's relaxation, each prefixed
// with where it was given.
func checkRelax(where string, r Relax) []string {
	var problems []string
	switch r.Effect {
	case "", toolplane.EffectRead, toolplane.EffectWrite, toolplane.EffectSend:
	default:
		problems = append(problems, fmt.Sprintf("%s.effect %q is not read, write or send", where, r.Effect))
	}
	if r.Effect == toolplane.EffectRead && r.Destructive != nil && *r.Destructive {
		problems = append(problems, where+": a read cannot be destructive")
	}
	switch {
	case r.IdempotentDownstream && r.Effect == toolplane.EffectRead:
		problems = append(problems, where+": idempotent_downstream is for a write or send; a read is never held")
	case r.MaxAttempts != 0 && !r.IdempotentDownstream:
		problems = append(problems, where+": max_attempts needs idempotent_downstream: a call is repeated only where the server makes one effect of it")
	case r.MaxAttempts < 0 || r.MaxAttempts > maxMaxAttempts:
		problems = append(problems, fmt.Sprintf("%s: max_attempts %d is outside 1..%d", where, r.MaxAttempts, maxMaxAttempts))
	}
	return problems
}

// expand replaces ${NAME} with the variable of toolplane's environment; a
// variable that is not set is an error, so a missing secret fails the
// connection loudly rather than sending an empty credential.
func expand(v string) (string, error) {
	var missing []string
	out := os.Expand(v, func(name string) string {
		val, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// urlMasker answers a replacer that hides, in any text, what
// boundary.RedactURL hides of raw, as raw writes it (and so as an error
// quoting raw does): the whole URL first, by its redacted form, then each
// hidden part on its own, written as raw has it and unescaped, longest
// first, so that no shorter part is replaced inside a longer one. It
// answers nil when raw hides nothing.
func urlMasker(raw string) *strings.Replacer {
	var parts []string
	for _, p := range boundary.URLSecrets(raw) {
		parts = append(parts, p)
		if up, err := url.PathUnescape(p); err == nil {
			parts = append(parts, up)
		}
		if uq, err := url.QueryUnescape(p); err == nil {
			parts = append(parts, uq)
		}
	}
	// Very short values would mask unrelated text ("1", "on"); the whole
	// URL, replaced first, still hides them where it is quoted.
	parts = slices.DeleteFunc(parts, func(s string) bool { return len(s) < 4 })
	slices.Sort(parts)
	parts = slices.Compact(parts)
	slices.SortStableFunc(parts, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	if red := boundary.RedactURL(raw); red != raw {
		pairs = append(pairs, raw, red)
		if u, err := url.Parse(raw); err == nil && u.RawQuery != "" {
			// The query on its own, as an error that quotes the
			// request rather than the configured address shows it.
			if _, q, ok := strings.Cut(red, "?"); ok {
				q, _, _ = strings.Cut(q, "#")
				pairs = append(pairs, "?"+u.RawQuery, "?"+q)
			}
		}
	}
	for _, p := range parts {
		pairs = append(pairs, p, boundary.Redacted)
	}
	if len(pairs) == 0 {
		return nil
	}
	return strings.NewReplacer(pairs...)
}
