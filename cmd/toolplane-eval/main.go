// Command toolplane-eval judges tool search against the evaluation
// catalogue and its labelled queries, offline; see package discoveryeval.
// From the module root,
//
//	go run ./cmd/toolplane-eval -split heldout -v
//
// prints recall@1, recall@5, MRR and nDCG@10 per query kind, the
// rejection rate on queries with no right answer, deprecated tools ranked
// above their replacement, the tokens of tools/list for a 1,000-tool
// grant in full and meta-tool mode, and search latency over 10,000
// versions; -json prints the same as JSON, -perf=false skips the last
// two, and -queries file.json runs a query set written elsewhere (in the
// embedded set's form) against the same catalogue. This file only wires the process to the package.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolplane/toolplane/discovery/offline"
	"github.com/toolplane/toolplane/internal/discoveryeval"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The offline default a node's index searches with.
	code := discoveryeval.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, offline.Options())
	stop()
	os.Exit(code)
}
