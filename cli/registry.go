package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolplane/toolplane/compat"
	"github.com/toolplane/toolplane/toolfile"
)

// client is the command line's view of a toolplane server: the registry,
// grant and bundle commands are API calls, so the server enforces every
// role the same way whichever door is used.
type client struct {
	server, key string
	stdout      io.Writer
	http        *http.Client
}

// remoteFlags adds --server and --key, defaulting from the environment.
func remoteFlags(fs *flag.FlagSet) (*string, *string) {
	server := os.Getenv("TOOLPLANE_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	return fs.String("server", server, "the toolplane server ($TOOLPLANE_SERVER)"),
		fs.String("key", os.Getenv("TOOLPLANE_KEY"), "your API key ($TOOLPLANE_KEY)")
}

// remoteCmd is one subcommand that talks to a server: its flags, --server
// and --key among them, and once parsed its positional arguments.
type remoteCmd struct {
	name        string
	fs          *flag.FlagSet
	server, key *string
	pos         []string
	stderr      io.Writer
}

func newRemoteCmd(name string, stderr io.Writer) *remoteCmd {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	server, key := remoteFlags(fs)
	return &remoteCmd{name: name, fs: fs, server: server, key: key, stderr: stderr}
}

// parse parses args and answers the client for the server named; false
// when the arguments are not valid (the flag package said why).
func (r *remoteCmd) parse(args []string, stdout io.Writer) (*client, bool) {
	pos, err := parse(r.fs, args)
	if err != nil {
		return nil, false
	}
	r.pos = pos
	return &client{server: *r.server, key: *r.key, stdout: stdout, http: &http.Client{Timeout: time.Minute}}, true
}

// need reports whether there are exactly n positional arguments, saying
// which are wanted when not.
func (r *remoteCmd) need(n int, what string) bool {
	if len(r.pos) != n {
		fmt.Fprintf(r.stderr, "toolplane %s: want %s\n", r.name, what)
		return false
	}
	return true
}

// parse parses flags placed anywhere among the positional arguments and
// answers the positionals.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// apiError is the server's error envelope.
type apiError struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		FieldPath string `json:"field_path"`
	} `json:"error"`
}

// do sends a request and prints the answer as indented JSON. A refusal is
// an error carrying the server's code and message.
func (c *client) do(method, path string, body any, contentType string) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd, contentType = bytes.NewReader(js), "application/json"
	}
	req, err := http.NewRequest(method, strings.TrimRight(c.server, "/")+path, rd)
	if err != nil {
		return err
	}
	if c.key == "" {
		return errors.New("no API key: pass --key or set TOOLPLANE_KEY")
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 400 {
		var e apiError
		if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
			msg := e.Error.Code + ": " + e.Error.Message
			if e.Error.FieldPath != "" {
				msg += " (" + e.Error.FieldPath + ")"
			}
			return errors.New(msg)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	var out bytes.Buffer
	if json.Indent(&out, data, "", "  ") != nil {
		out.Reset()
		out.Write(data)
	}
	fmt.Fprintln(c.stdout, strings.TrimSpace(out.String()))
	return nil
}

// tools runs `toolplane tools ...`.
func tools(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, toolsUsage)
		return 2
	}
	if args[0] == "diff" {
		return diffCmd(args[1:], stdout, stderr)
	}
	rc := newRemoteCmd("tools "+args[0], stderr)
	fs := rc.fs
	note := fs.String("note", "", "why (a rejection needs one)")
	sunset := fs.String("sunset", "", "deprecate: the earliest retirement, YYYY-MM-DD or RFC 3339")
	replacement := fs.String("replacement", "", "deprecate: the version callers should move to")
	name := fs.String("name", "", "list: only this tool")
	owner := fs.String("owner", "", "list: only this team's tools")
	state := fs.String("state", "", "list: only versions in this state")
	c, ok := rc.parse(args[1:], stdout)
	if !ok {
		return 2
	}
	pos, need := rc.pos, rc.need
	switch args[0] {
	case "publish":
		if !need(1, "FILE") {
			return 2
		}
		data, err := os.ReadFile(pos[0])
		if err != nil {
			return report(stderr, err)
		}
		ct := "application/json"
		if ext := strings.ToLower(filepath.Ext(pos[0])); ext == ".yaml" || ext == ".yml" {
			ct = "application/x-yaml"
		}
		err = c.do("POST", "/v1/registry/tools", data, ct)
		return report(stderr, err)
	case "list":
		q := url.Values{}
		for k, v := range map[string]string{"name": *name, "owner": *owner, "state": *state} {
			if v != "" {
				q.Set(k, v)
			}
		}
		return report(stderr, c.do("GET", "/v1/registry/tools?"+q.Encode(), nil, ""))
	case "show":
		if !need(2, "NAME VERSION") {
			return 2
		}
		return report(stderr, c.do("GET", "/v1/registry/tools/"+url.PathEscape(pos[0])+"/versions/"+url.PathEscape(pos[1]), nil, ""))
	case "approve", "reject", "submit", "retire", "deprecate":
		if !need(2, "NAME VERSION") {
			return 2
		}
		body := map[string]any{}
		if *note != "" {
			body["note"] = *note
		}
		if args[0] == "deprecate" {
			t, err := parseTime(*sunset)
			if err != nil {
				fmt.Fprintf(stderr, "toolplane tools deprecate: --sunset: %v\n", err)
				return 2
			}
			body["sunset_at"] = t
			if *replacement != "" {
				body["replacement"] = *replacement
			}
		}
		path := "/v1/registry/tools/" + url.PathEscape(pos[0]) + "/versions/" + url.PathEscape(pos[1]) + "/" + args[0]
		return report(stderr, c.do("POST", path, body, ""))
	default:
		fmt.Fprintf(stderr, "toolplane tools: unknown command %q\n%s", args[0], toolsUsage)
		return 2
	}
}

const toolsUsage = `usage: toolplane tools <command> [--server URL] [--key KEY]
  publish FILE                 publish a version of a definition (YAML or JSON)
  diff OLD NEW                 the compatibility report between two definition files (offline)
  list [--name N] [--owner T] [--state S]
  show NAME VERSION
  submit NAME VERSION          send a rejected version back to review
  approve NAME VERSION         (platform_admin)
  reject NAME VERSION --note WHY
  deprecate NAME VERSION --sunset YYYY-MM-DD [--replacement VERSION]
  retire NAME VERSION
`

// diffCmd prints the compatibility report between two definition files
// and exits 1 when the new version's bump is too small for its changes.
func diffCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprint(stderr, "usage: toolplane tools diff OLD_FILE NEW_FILE\n")
		return 2
	}
	from, _, err := toolfile.ReadFile(args[0])
	if err != nil {
		return report(stderr, err)
	}
	to, _, err := toolfile.ReadFile(args[1])
	if err != nil {
		return report(stderr, err)
	}
	rep, err := compat.Classify(&from, &to)
	if err != nil {
		return report(stderr, err)
	}
	fmt.Fprintf(stdout, "%s %s -> %s: the changes need %s\n", to.Name, from.Version, to.Version, rep.Required)
	for _, ch := range rep.Changes {
		fmt.Fprintf(stdout, "  %s\n", ch)
	}
	if err := compat.Gate(&from, &to, rep); err != nil {
		fmt.Fprintf(stderr, "refused: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "accepted")
	return 0
}

// grantsCmd runs `toolplane grants ...`.
func grantsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, grantsUsage)
		return 2
	}
	rc := newRemoteCmd("grants "+args[0], stderr)
	fs := rc.fs
	pattern := fs.String("pattern", "", "add: a glob over tool names, optionally @range (payments.*, payments.refund_order@^2.1.0)")
	bundle := fs.String("bundle", "", "add: a bundle to grant")
	var tenants stringList
	fs.Var(&tenants, "tenant", "add: limit the grant to this tenant (repeatable)")
	expires := fs.String("expires", "", "add: when the grant ends, YYYY-MM-DD or RFC 3339")
	reason := fs.String("reason", "", "deny: why")
	revoked := fs.Bool("revoked", false, "list: include revoked grants")
	c, ok := rc.parse(args[1:], stdout)
	if !ok {
		return 2
	}
	pos, need := rc.pos, rc.need
	switch args[0] {
	case "add":
		if !need(1, "AGENT") {
			return 2
		}
		body := map[string]any{"agent_id": pos[0], "pattern": *pattern, "bundle": *bundle, "tenant_scope": []string(tenants)}
		if *expires != "" {
			t, err := parseTime(*expires)
			if err != nil {
				fmt.Fprintf(stderr, "toolplane grants add: --expires: %v\n", err)
				return 2
			}
			body["expires_at"] = t
		}
		return report(stderr, c.do("POST", "/v1/grants", body, ""))
	case "list":
		q := url.Values{}
		if len(pos) > 0 {
			q.Set("agent_id", pos[0])
		}
		if *revoked {
			q.Set("revoked", "true")
		}
		return report(stderr, c.do("GET", "/v1/grants?"+q.Encode(), nil, ""))
	case "revoke":
		if !need(1, "GRANT_ID") {
			return 2
		}
		return report(stderr, c.do("POST", "/v1/grants/"+url.PathEscape(pos[0])+"/revoke", nil, ""))
	case "explain":
		if !need(1, "AGENT") {
			return 2
		}
		return report(stderr, c.do("GET", "/v1/agents/"+url.PathEscape(pos[0])+"/explain", nil, ""))
	case "deny":
		if !need(2, "AGENT|'*' PATTERN") {
			return 2
		}
		return report(stderr, c.do("POST", "/v1/denies", map[string]any{"agent_id": pos[0], "pattern": pos[1], "reason": *reason}, ""))
	case "denies":
		return report(stderr, c.do("GET", "/v1/denies", nil, ""))
	case "undeny":
		if !need(1, "DENY_ID") {
			return 2
		}
		return report(stderr, c.do("DELETE", "/v1/denies/"+url.PathEscape(pos[0]), nil, ""))
	default:
		fmt.Fprintf(stderr, "toolplane grants: unknown command %q\n%s", args[0], grantsUsage)
		return 2
	}
}

const grantsUsage = `usage: toolplane grants <command> [--server URL] [--key KEY]
  add AGENT --pattern P | --bundle B [--tenant T]... [--expires DATE]
  list [AGENT] [--revoked]
  revoke GRANT_ID
  explain AGENT                every tool AGENT can call, at which version, and which grant allowed it
  deny AGENT|'*' PATTERN --reason WHY    ('*': every agent, an incident deny)
  denies
  undeny DENY_ID
`

// bundlesCmd runs `toolplane bundles ...`.
func bundlesCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, bundlesUsage)
		return 2
	}
	rc := newRemoteCmd("bundles "+args[0], stderr)
	c, ok := rc.parse(args[1:], stdout)
	if !ok {
		return 2
	}
	pos := rc.pos
	switch args[0] {
	case "put":
		if len(pos) < 2 {
			fmt.Fprint(stderr, "toolplane bundles put: want NAME REF...\n")
			return 2
		}
		return report(stderr, c.do("PUT", "/v1/bundles/"+url.PathEscape(pos[0]), map[string]any{"refs": pos[1:]}, ""))
	case "list":
		return report(stderr, c.do("GET", "/v1/bundles", nil, ""))
	default:
		fmt.Fprintf(stderr, "toolplane bundles: unknown command %q\n%s", args[0], bundlesUsage)
		return 2
	}
}

const bundlesUsage = `usage: toolplane bundles <command> [--server URL] [--key KEY]
  put NAME REF...              create or replace a bundle (REF: name@range, e.g. payments.get_order@^1.0.0)
  list
`

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("missing")
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}

// report prints an error and answers the exit status.
func report(stderr io.Writer, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "toolplane: %v\n", err)
		return 1
	}
	return 0
}
