package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoMCPGateway is what FindMCPGateway answers when there is no
// docker/mcp-gateway binary to run.
var ErrNoMCPGateway = errors.New("no docker/mcp-gateway binary")

// MCPGatewayHint says how to get the binary of the mcpgateway target: the
// module proxy refuses github.com/docker/mcp-gateway, so it is built from
// a checkout of its source.
const MCPGatewayHint = "build it from a checkout of https://github.com/docker/mcp-gateway " +
	"(CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o docker-mcp ./cmd/docker-mcp; " +
	"-mod=mod fetches its dependencies from the module proxy instead of its vendor directory) and pass -mcp-gateway PATH"

// FindMCPGateway answers the docker/mcp-gateway binary at path (its CLI,
// docker-mcp, run standalone), or ErrNoMCPGateway with how to build it.
// There is no default: it is on no PATH unless someone put it there.
func FindMCPGateway(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%w: -mcp-gateway not set; %s", ErrNoMCPGateway, MCPGatewayHint)
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("%w at %s (%v); %s", ErrNoMCPGateway, path, err, MCPGatewayHint)
	}
	return p, nil
}

// mcpGatewayServer is the name the gateway's catalog gives the plain
// server. The gateway lists the server's tools under their own names
// (its tool-name-prefix feature is off unless Docker's configuration
// turns it on, and this run gives it a configuration of its own).
const mcpGatewayServer = "plain"

// MCPGatewayCatalog answers a catalog for docker/mcp-gateway holding one
// server: the remote MCP server at upstream (its Streamable HTTP
// endpoint). A remote server is one the gateway connects to over HTTP
// rather than a container it starts, which is what lets it run with no
// Docker engine.
func MCPGatewayCatalog(upstream string) string {
	return fmt.Sprintf(`name: toolplane-load
registry:
  %s:
    type: remote
    title: toolplane-load plain MCP server
    remote:
      url: %s
      transport_type: streamable-http
`, mcpGatewayServer, strconv.Quote(upstream))
}

// MCPGatewayArgs answers the arguments of `gateway run` serving
// Streamable HTTP on listen (host:port) in front of the one server of the
// catalog at catalog. --static skips pulling and verifying images and
// guessing the container's network, the two steps that ask a Docker
// engine; --secrets names an empty file so the Docker Desktop secrets API
// is not asked. The rest are the defaults: every call logged, arguments
// and results scanned for secrets. extra come last, so they can turn
// those off (--log-calls=false, --block-secrets=false).
func MCPGatewayArgs(listen, catalog, secrets string, extra []string) ([]string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("mcp-gateway: listen address %q: %w", listen, err)
	}
	args := []string{"gateway", "run",
		"--transport", "streaming", "--host", host, "--port", port,
		"--catalog", catalog, "--servers", mcpGatewayServer,
		"--secrets", secrets, "--static"}
	return append(args, extra...), nil
}

// mcpGatewayEnv is the environment the gateway runs with, besides HOME
// and its token. DOCKER_MCP_IN_CONTAINER skips the Docker CLI plugin's
// check that asks the engine whether it is Docker Desktop (the root
// command's pre-run, docker.RunningInDockerCE, which fails with no
// engine); DOCKER_MCP_ALLOW_INSECURE_REMOTE_URLS lets a remote server be
// plain http on loopback, which the gateway otherwise refuses.
var mcpGatewayEnv = []string{"DOCKER_MCP_IN_CONTAINER=1", "DOCKER_MCP_ALLOW_INSECURE_REMOTE_URLS=1"}

// MCPGateway is a docker/mcp-gateway process in front of a remote MCP
// server, started for a run.
type MCPGateway struct {
	// URL is its MCP endpoint, Token the bearer token it requires.
	URL, Token string
	// Args are the arguments it runs with.
	Args []string
	// Dir is its HOME, holding its catalog (under .docker/mcp/catalogs)
	// and log (gateway.log, where its output goes: lines per call).
	Dir  string
	pid  int
	stop func() error
}

// PID answers the id of the process that serves.
func (g *MCPGateway) PID() int { return g.pid }

// Close stops the gateway and removes its directory.
func (g *MCPGateway) Close() error { return g.stop() }

// StartMCPGateway runs binary (see FindMCPGateway) as a Streamable HTTP
// gateway in front of the MCP server at upstream, in a temporary HOME of
// its own, with extra added to its arguments, and answers once its
// /health says its configuration is loaded and the server's tools
// listed.
func StartMCPGateway(ctx context.Context, binary, upstream string, extra []string) (*MCPGateway, error) {
	dir, err := os.MkdirTemp("", "toolplane-load-mcp-gateway-")
	if err != nil {
		return nil, fmt.Errorf("mcp-gateway: %w", err)
	}
	token, err := randomToken()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("mcp-gateway: %w", err)
	}
	// The gateway reads local catalogs only from ~/.docker/mcp/catalogs.
	catalogs := filepath.Join(dir, ".docker", "mcp", "catalogs")
	if err := os.MkdirAll(catalogs, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("mcp-gateway: %w", err)
	}
	catalog := filepath.Join(catalogs, "toolplane-load.yaml")
	secrets := filepath.Join(dir, "secrets.env")
	for name, body := range map[string]string{catalog: MCPGatewayCatalog(upstream), secrets: ""} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("mcp-gateway: %w", err)
		}
	}
	// The gateway takes a port, not a listener, so a free one is picked
	// here; another process could take it in between, hence the few
	// tries.
	var lastErr error
	for range 3 {
		g, err := startMCPGatewayOnce(ctx, binary, dir, catalog, secrets, token, extra)
		if err == nil {
			return g, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func startMCPGatewayOnce(ctx context.Context, binary, dir, catalog, secrets, token string, extra []string) (*MCPGateway, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mcp-gateway: pick a port: %w", err)
	}
	listen := ln.Addr().String()
	ln.Close()
	args, err := MCPGatewayArgs(listen, catalog, secrets, extra)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "gateway.log")
	// A file, not a pipe: the gateway writes a line per call, and a pipe
	// would have this process copy them, on the same cores as the load.
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("mcp-gateway: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), mcpGatewayEnv...)
	cmd.Env = append(cmd.Env, "HOME="+dir, "DOCKER_CONFIG="+filepath.Join(dir, ".docker"), "MCP_GATEWAY_AUTH_TOKEN="+token)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mcp-gateway: start %s: %w", binary, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stopProc := func() { interrupt(cmd, exited) }
	logTail := func() string {
		b, _ := os.ReadFile(logPath)
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		return strings.TrimSpace(string(b))
	}
	// The gateway listens before it reads its configuration and connects
	// to the server, so a connection alone does not say it is ready; its
	// /health answers 200 only once the configuration is loaded.
	base := "http://" + listen
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case <-exited:
			return nil, fmt.Errorf("mcp-gateway: exited before serving on %s: %s", listen, logTail())
		case <-ctx.Done():
			stopProc()
			return nil, fmt.Errorf("mcp-gateway: %w", ctx.Err())
		default:
		}
		if healthy(ctx, hc, base+"/health") {
			break
		}
		if time.Now().After(deadline) {
			stopProc()
			return nil, fmt.Errorf("mcp-gateway: not healthy on %s within 30s: %s", listen, logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Healthy says the configuration loaded, not that the server came
	// up: the gateway carries on with none when it cannot reach it.
	if log := logTail(); strings.Contains(log, "Can't start "+mcpGatewayServer) {
		stopProc()
		return nil, fmt.Errorf("mcp-gateway: did not connect to the plain server: %s", log)
	}
	hc.CloseIdleConnections()
	return &MCPGateway{URL: base + upstreamPath, Token: token, Args: args, Dir: dir, pid: cmd.Process.Pid, stop: func() error {
		stopProc()
		return os.RemoveAll(dir)
	}}, nil
}

// healthy reports whether a GET of url answers 200.
func healthy(ctx context.Context, hc *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
