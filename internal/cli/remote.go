package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// DefaultServer is the server a command talks to when no flag, variable or
// context names one.
const DefaultServer = "http://localhost:8080"

// remote is a command that talks to a server: its --server, --key and
// --context flags, and once resolved, where they came from.
type remote struct {
	a                    *app
	server, key, context string
}

// addRemote gives cmd the flags that choose a server and a key.
func addRemote(a *app, cmd *cobra.Command) *remote {
	r := &remote{a: a}
	f := cmd.Flags()
	f.StringVar(&r.server, "server", "", "the toolplane server (default: $TOOLPLANE_SERVER, the context's, or "+DefaultServer+")")
	f.StringVar(&r.key, "key", "", "your API key (default: $TOOLPLANE_KEY or the context's)")
	f.StringVar(&r.context, "context", "", "use this context of the config file instead of the current one")
	return r
}

// target is a resolved server and key, and where each came from, so an
// error can say what to change.
type target struct {
	server, serverFrom string
	key, keyFrom       string
}

// resolve applies the precedence flag > environment > context > default,
// server and key each, except that a context's key is used only with that
// context's server.
// An empty flag is refused rather than read as "no key": an empty --key
// is almost always a variable that failed to fill, and silently sending
// another key (or none) would hide that.
func (r *remote) resolve(cmd *cobra.Command) (target, error) {
	for _, name := range []string{"server", "key", "context"} {
		if f := cmd.Flags().Lookup(name); f.Changed && strings.TrimSpace(f.Value.String()) == "" {
			return target{}, usageErr("--%s is empty: give a value, or leave the flag out to use $TOOLPLANE_%s or the config file's context", name, strings.ToUpper(name))
		}
	}
	t := target{server: DefaultServer, serverFrom: "the default"}
	cfg, file, err := loadConfig(r.a.getenv)
	if err != nil {
		return t, err
	}
	// ctxServer is the server the context's key was saved for, while the
	// key resolved so far is the context's ("" otherwise).
	var ctxServer string
	ctxName := cfg.CurrentContext
	if r.context != "" {
		ctxName = r.context
	}
	if ctxName != "" {
		c := cfg.find(ctxName)
		if c == nil {
			if r.context != "" {
				return t, usageErr("no context %q in %s (toolplane config get-contexts lists them)", ctxName, file)
			}
			return t, fmt.Errorf("the current context %q is not in %s: choose one with toolplane config use-context", ctxName, file)
		}
		from := fmt.Sprintf("context %q", c.Name)
		if c.Server != "" {
			t.server, t.serverFrom = c.Server, from
		}
		if c.Key != "" {
			t.key, t.keyFrom = c.Key, from
			ctxServer = strings.TrimRight(t.server, "/")
		}
	}
	if v := r.a.getenv("TOOLPLANE_SERVER"); v != "" && r.context == "" {
		t.server, t.serverFrom = v, "$TOOLPLANE_SERVER"
	}
	if v := r.a.getenv("TOOLPLANE_KEY"); v != "" && r.context == "" {
		t.key, t.keyFrom, ctxServer = v, "$TOOLPLANE_KEY", ""
	}
	if r.server != "" {
		t.server, t.serverFrom = r.server, "--server"
	}
	if r.key != "" {
		t.key, t.keyFrom, ctxServer = r.key, "--key", ""
	}
	t.server = strings.TrimRight(t.server, "/")
	if ctxServer != "" && t.server != ctxServer {
		// A context's key goes only to that context's server: a server
		// named by --server or $TOOLPLANE_SERVER never receives a
		// credential saved for another.
		t.key, t.keyFrom = "", ""
	}
	if u, err := url.Parse(t.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return t, usageErr("the server %q (from %s) is not an http:// or https:// URL", t.server, t.serverFrom)
	}
	if t.key == "" {
		return t, usageErr("no API key for %s: pass --key, set TOOLPLANE_KEY, or save one with toolplane login --server %s --key KEY", t.server, t.server)
	}
	return t, nil
}

// ErrUnreachable is wrapped by every error of a command that could not
// reach its server.
var ErrUnreachable = errors.New("cannot reach toolplane")

// APIError is a refusal the server answered, with its stable code.
type APIError struct {
	Status    int
	Code      string
	Message   string
	FieldPath string
}

func (e *APIError) Error() string {
	msg := e.Code + ": " + e.Message
	if e.FieldPath != "" {
		msg += " (" + e.FieldPath + ")"
	}
	return msg
}

// call sends one request and answers the body of a successful answer.
func (r *remote) call(cmd *cobra.Command, method, path string, body any, contentType string) ([]byte, error) {
	t, err := r.resolve(cmd)
	if err != nil {
		return nil, err
	}
	return t.call(cmd.Context(), method, path, body, contentType)
}

func (t target) call(ctx context.Context, method, path string, body any, contentType string) ([]byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd, contentType = bytes.NewReader(js), "application/json"
	}
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, method, t.server+path, rd)
	if err != nil {
		return nil, fmt.Errorf("the server %q (from %s): %w", t.server, t.serverFrom, err)
	}
	req.Header.Set("Authorization", "Bearer "+t.key)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, t.unreachable(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", t.server, err)
	}
	if resp.StatusCode >= 400 {
		return nil, t.answerErr(method, path, resp, data)
	}
	return data, nil
}

// answerErr is the error of a failed answer, resp with its body data.
func (t target) answerErr(method, path string, resp *http.Response, data []byte) error {
	{
		var e struct {
			Error struct {
				Code      string `json:"code"`
				Message   string `json:"message"`
				FieldPath string `json:"field_path"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
			return fmt.Errorf("%s %s%s: %s", method, t.server, path, resp.Status)
		}
		ae := &APIError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message, FieldPath: e.Error.FieldPath}
		if resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("%w; toolplane at %s did not accept the key from %s: pass another with --key, TOOLPLANE_KEY or toolplane login", ae, t.server, t.keyFrom)
		}
		return ae
	}
}

// stream GETs path and copies the answer's body to w as it comes, with
// no time limit but ctx's: an export may be long. A body cut short (the
// server failed mid-way) is an error, so a partial export is never taken
// for a whole one.
func (t target) stream(ctx context.Context, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, "GET", t.server+path, nil)
	if err != nil {
		return fmt.Errorf("the server %q (from %s): %w", t.server, t.serverFrom, err)
	}
	req.Header.Set("Authorization", "Bearer "+t.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return t.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return t.answerErr("GET", path, resp, data)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("the export from %s ended early: %w", t.server, err)
	}
	return nil
}

// unreachable words a transport error so it names the server tried, where
// that choice came from, and how to change it.
func (t target) unreachable(err error) error {
	why := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		why = ue.Err.Error()
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case isTimeout(err):
		why = "no answer in time"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		why = "no such host " + dnsErr.Name
	}
	return fmt.Errorf("%w at %s (from %s): %s; start it with `toolplane serve` or point at another with --server / TOOLPLANE_SERVER / `toolplane login`",
		ErrUnreachable, t.server, t.serverFrom, why)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
