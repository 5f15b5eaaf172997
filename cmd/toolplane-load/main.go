// Command toolplane-load measures toolplane's doors under concurrent
// clients beside baselines (a plain MCP SDK server, a bare reverse proxy)
// and prints a markdown table; see package loadtest. From the module root,
//
//	go run ./cmd/toolplane-load -duration 5s -clients 1,16 -rounds 3
//
// builds and starts `toolplane serve --demo --rate-limit 0` in a temporary
// directory and measures REST, MCP, the plain server and the proxy;
// -url and -key measure a running toolplane instead. Every cell reports
// the CPU per call of each server process on its own (toolplane, the bare
// Go proxy, nginx, the JSON API, the plain server) with its median and
// range over the rounds, and several rounds print the per-round ratios of
// toolplane's CPU per call to the proxy's and to nginx's (target
// apinginx; -nginx PATH, -install-nginx). Two builds side by side:
//
//	go run ./cmd/toolplane-load -compare /tmp/toolplane-A,/tmp/toolplane-B -target httpread,mcp -rounds 10 -duration 1s
//
// prints B/A of toolplane's CPU per call and of throughput, round by
// round, with median and range;
//
//	go run ./cmd/toolplane-load -mcp-gateway /tmp/docker-mcp -target mcp,federated,proxy,mcpgateway -rounds 10 -duration 1s \
//	  -upstream-addr 127.0.0.1:18556 -serve-arg=--upstreams -serve-arg=/tmp/ups.yaml -federated /mcp/plain -federated-grant 'mcp.plain.*'
//
// sets docker/mcp-gateway (`gateway run --transport streaming --static`,
// the plain server a remote server of its catalog, no Docker engine
// needed) beside toolplane's MCP door and federation, and prints
// toolplane's CPU per call over the gateway's. The module proxy refuses
// github.com/docker/mcp-gateway, so its binary is built from a checkout:
//
//	git clone https://github.com/docker/mcp-gateway /tmp/mcpgw && cd /tmp/mcpgw &&
//	  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o /tmp/docker-mcp ./cmd/docker-mcp
//
// (BENCHMARKS.md, "Against docker/mcp-gateway", has /tmp/ups.yaml); and
//
//	go run ./cmd/toolplane-load hang -rounds 3
//
// sets a hanging downstream beside a healthy one, with toolplane's traffic
// protections on and off (see BENCHMARKS.md). This file only wires
// the process to the package.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolplane/toolplane/internal/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := loadtest.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
