// Command toolplane-load measures toolplane's doors under concurrent
// clients beside baselines (a plain MCP SDK server, a bare reverse proxy)
// and prints a markdown table; see package loadtest. From the module root,
//
//	go run ./cmd/toolplane-load -duration 5s -clients 1,16 -rounds 3
//
// builds and starts `toolplane serve --demo --rate-limit 0` in a temporary
// directory and measures REST, MCP, the plain server and the proxy;
// -url and -key measure a running toolplane instead, and
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
