package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo"
	"github.com/toolplane/toolplane/projection"
)

// ReadTool is the demo catalogue's read tool, which every target calls.
const ReadTool = "demo.search_tickets"

// readTool answers the definition and handler of the demo catalogue's tool
// named name, over a fresh helpdesk, so a plain server answers with the
// very code toolplane runs for it.
func readTool(name string) (*toolplane.Definition, *handler.Binding, error) {
	defs, bindings, err := demo.New().Catalogue()
	if err != nil {
		return nil, nil, fmt.Errorf("demo catalogue: %w", err)
	}
	for i := range defs {
		if defs[i].Name == name {
			for _, b := range bindings {
				if b.Key == defs[i].Binding.Handler.Key {
					return &defs[i], b, nil
				}
			}
		}
	}
	return nil, nil, fmt.Errorf("demo catalogue: no tool %s with a handler", name)
}

// PlainHandler answers a plain MCP server over Streamable HTTP: one SDK
// server (mcp.NewServer, mcp.NewStreamableHTTPHandler with default
// options) with the demo read tool under the name toolplane gives it, whose
// handler decodes the arguments, runs the demo's handler and answers its
// result as JSON text. No authentication, policy, validation, audit or
// result boundary: the baseline toolplane's MCP door is compared with, and
// the upstream a proxy or a federating toolplane forwards to.
func PlainHandler() (http.Handler, error) {
	def, b, err := readTool(ReadTool)
	if err != nil {
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	srv.AddTool(projection.MCP(def), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args any = map[string]any{}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return errorResult("the arguments are not JSON: " + err.Error()), nil
			}
		}
		out, err := b.Invoke(ctx, handler.Call{Tool: def.Name}, args)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		text, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode result: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil), nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// ProxyHandler answers a bare reverse proxy to upstream: the least any
// gateway in front of an MCP server costs, to set toolplane's federation
// beside. Its only tuning is an idle pool as large as the clients, which
// any gateway keeps; with the default of two, 16 clients would measure
// connection setup instead.
func ProxyHandler(upstream *url.URL) *httputil.ReverseProxy {
	p := httputil.NewSingleHostReverseProxy(upstream)
	p.Transport = newTransport(256)
	return p
}

// Upstream is a plain MCP server and a bare reverse proxy to it, on
// loopback.
type Upstream struct {
	// URL is the plain server's MCP endpoint, ProxyURL the same endpoint
	// through the proxy.
	URL, ProxyURL string
	stop          func() error
	// pid is the helper process's id; zero when in this process.
	pid int
	// proxyPID is the id of the proxy's own process, when it has one
	// (UseProxyProcess); zero when the proxy shares the upstream's.
	proxyPID int
}

// PID answers the id of the process serving the upstream and proxy, or
// zero when they run in this process.
func (u *Upstream) PID() int { return u.pid }

// ProxyPIDs answers the processes a call through the proxy runs in: the
// proxy's own (when it has one) and the upstream's; nil when the upstream
// runs in this process.
func (u *Upstream) ProxyPIDs() []int {
	switch {
	case u.pid == 0:
		return nil
	case u.proxyPID != 0:
		return []int{u.proxyPID, u.pid}
	}
	return []int{u.pid}
}

// Close stops the servers (or the helper processes holding them).
func (u *Upstream) Close() error { return u.stop() }

// UseProxyProcess starts a bare reverse proxy to the upstream in a process
// of its own (name with args: toolplane-load's "proxy" subcommand) and
// makes it the proxy measured. A gateway is a process in front of the
// server it fronts, as toolplane is; a proxy sharing the upstream's
// process would cross one process boundary less per call than toolplane
// does.
func (u *Upstream) UseProxyProcess(ctx context.Context, stderr io.Writer, name string, args ...string) error {
	h, err := startHelper(ctx, stderr, proxyLine, nil, name, args...)
	if err != nil {
		return fmt.Errorf("proxy process: %w", err)
	}
	stopUpstream := u.stop
	u.ProxyURL, u.proxyPID = h.match[0]+upstreamPath, h.pid
	u.stop = func() error { return errors.Join(h.stop(), stopUpstream()) }
	return nil
}

// proxyLine is what ServeProxy prints once it serves.
var proxyLine = regexp.MustCompile(`^proxy serving on (http://\S+) to \S+$`)

// ServeProxy serves a bare reverse proxy to the server at to (its base
// URL) on addr until ctx ends, after printing where it serves to stdout:
// the body of the proxy's helper process.
func ServeProxy(ctx context.Context, addr, to string, stdout io.Writer) error {
	base, err := url.Parse(to)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return fmt.Errorf("proxy: -to must be a base URL such as http://127.0.0.1:18556, not %q", to)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("proxy: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: ProxyHandler(base), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	if _, err := fmt.Fprintf(stdout, "proxy serving on http://%s to %s\n", ln.Addr(), base); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	<-ctx.Done()
	return nil
}

// upstreamPath is where the plain server answers MCP.
const upstreamPath = "/mcp"

// StartUpstream serves a plain MCP server on addr (host:port; port 0 picks
// one, a fixed one lets a toolplane be configured to federate to it) and a
// bare reverse proxy to it on another loopback port, in this process,
// until ctx ends or Close.
func StartUpstream(ctx context.Context, addr string) (*Upstream, error) {
	plain, err := PlainHandler()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(upstreamPath, plain)
	base, proxy, stop, err := serveWithProxy(ctx, addr, "upstream", mux)
	if err != nil {
		return nil, err
	}
	return &Upstream{URL: base.String() + upstreamPath, ProxyURL: proxy + upstreamPath, stop: stop}, nil
}

// serveWithProxy serves h on addr and a bare reverse proxy to it on
// another loopback port, in this process, until ctx ends or stop: a
// baseline and the same baseline behind a proxy, to measure beside
// toolplane. what names the server in errors.
func serveWithProxy(ctx context.Context, addr, what string, h http.Handler) (base *url.URL, proxy string, stop func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, fmt.Errorf("%s: listen on %s: %w", what, addr, err)
	}
	base = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return nil, "", nil, fmt.Errorf("%s proxy: listen: %w", what, err)
	}
	servers := []*http.Server{
		{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		{Handler: ProxyHandler(base), ReadHeaderTimeout: 10 * time.Second},
	}
	go servers[0].Serve(ln)
	go servers[1].Serve(pln)
	stopped := make(chan struct{})
	stop = func() error {
		select {
		case <-stopped:
			return nil
		default:
			close(stopped)
		}
		return errors.Join(servers[0].Close(), servers[1].Close())
	}
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-stopped:
		}
	}()
	return base, "http://" + pln.Addr().String(), stop, nil
}

// upstreamLine is what ServeUpstream prints once it serves, and
// StartUpstreamProcess waits for.
var upstreamLine = regexp.MustCompile(`^upstream serving MCP on (http://\S+) and a proxy to it on (http://\S+)$`)

// ServeUpstream runs StartUpstream on addr until ctx ends, after printing
// where it serves to stdout: the body of a helper process, so that the
// baseline servers run in a process of their own, as toolplane does,
// rather than sharing a Go runtime (and its scheduler and collector) with
// the load generator.
func ServeUpstream(ctx context.Context, addr string, stdout io.Writer) error {
	u, err := StartUpstream(ctx, addr)
	if err != nil {
		return err
	}
	defer u.Close()
	if _, err := fmt.Fprintf(stdout, "upstream serving MCP on %s and a proxy to it on %s\n", u.URL, u.ProxyURL); err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	<-ctx.Done()
	return nil
}

// StartUpstreamProcess runs name with args, a program that calls
// ServeUpstream (toolplane-load's "upstream" subcommand), and answers once
// it serves. Its stderr goes to stderr.
func StartUpstreamProcess(ctx context.Context, stderr io.Writer, name string, args ...string) (*Upstream, error) {
	h, err := startHelper(ctx, stderr, upstreamLine, nil, name, args...)
	if err != nil {
		return nil, fmt.Errorf("upstream process: %w", err)
	}
	return &Upstream{URL: h.match[0], ProxyURL: h.match[1], stop: h.stop, pid: h.pid}, nil
}

// helper is a helper process that said where it serves.
type helper struct {
	match []string // line's submatches
	pid   int
	stop  func() error
}

// startHelper runs name with args, env added to this process's
// environment, and answers once it prints a line matching line.
func startHelper(ctx context.Context, stderr io.Writer, line *regexp.Regexp, env []string, name string, args ...string) (*helper, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = stderr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	stop := func() error {
		interrupt(cmd, exited)
		return nil
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := line.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1:]:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case m := <-found:
		return &helper{match: m, pid: cmd.Process.Pid, stop: stop}, nil
	case <-exited:
		return nil, fmt.Errorf("%s exited before serving", name)
	case <-time.After(30 * time.Second):
		stop()
		return nil, fmt.Errorf("%s did not say where it serves within 30s", name)
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}
