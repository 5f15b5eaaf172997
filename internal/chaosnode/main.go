// Command chaosnode is the toolplane binary with one more tool compiled
// in: vendor.submit, which submits a provider job to a vendor at
// $TOOLPLANE_CHAOS_VENDOR_URL (the chaos test's, in its own process). The
// chaos test (cmd/toolplane) runs it as its nodes, so provider jobs are
// submitted, called back and settled across nodes killed at random. A
// deployment gives its own submit tools the same way (cli.MainWith and
// server.Config.ProviderJobTools); `toolplane serve` alone has none,
// since a submit tool's vendor call is code.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/cli"
	"github.com/toolplane/toolplane/internal/server"
	"github.com/toolplane/toolplane/providerjob"
)

// VendorEnv names the vendor's base URL; Provider is the vendor's name,
// its webhook adapter's (serve --provider-webhook).
const (
	VendorEnv = "TOOLPLANE_CHAOS_VENDOR_URL"
	Provider  = "chaosvendor"
)

// submitIn is vendor.submit's input: the action's id, its one ref.
type submitIn struct {
	ID string `json:"id"`
}

func main() {
	vendor := os.Getenv(VendorEnv)
	os.Exit(cli.MainWith(os.Args[1:], os.Stdout, os.Stderr, func(c *server.Config) {
		if vendor != "" {
			c.ProviderJobTools = tools(vendor)
		}
	}))
}

// tools answers vendor.submit over the node's provider jobs: a write
// without replay (its vendor call is made once per job, however often the
// call is retried).
func tools(vendor string) server.ProviderJobTools {
	client := &http.Client{Timeout: 10 * time.Second}
	return func(jobs *providerjob.Service) ([]toolplane.Definition, []*handler.Binding, error) {
		no := false
		def, err := handler.Define[submitIn, providerjob.Submitted](toolplane.Definition{
			Name: "vendor.submit", Version: "1.0.0", Description: "Submit one item to the vendor's batch enrichment.",
			Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "vendor.submit"}},
			Effect: toolplane.EffectWrite, Repeatable: &no})
		if err != nil {
			return nil, nil, err
		}
		b, err := handler.Bind("vendor.submit", func(ctx context.Context, call handler.Call, in submitIn) (providerjob.Submitted, error) {
			out, err := jobs.Submit(ctx, call, providerjob.Submission{Provider: Provider, Refs: []string{in.ID}},
				func(ctx context.Context, job *toolplane.ProviderJob, callbackURL string) (string, error) {
					return post(ctx, client, vendor, in.ID, job, callbackURL)
				})
			if err != nil {
				return providerjob.Submitted{}, err
			}
			return *out, nil
		}, nil)
		if err != nil {
			return nil, nil, err
		}
		return []toolplane.Definition{def}, []*handler.Binding{b}, nil
	}
}

// post makes the one vendor call of a job, and answers the vendor's id.
func post(ctx context.Context, client *http.Client, vendor, ref string, job *toolplane.ProviderJob, callbackURL string) (string, error) {
	body, _ := json.Marshal(map[string]any{"name": providerjob.BatchName(job.ID), "webhook_url": callbackURL, "refs": []string{ref}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, vendor+"/batches", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("vendor: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("vendor answered %s", resp.Status)
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("vendor: %w", err)
	}
	return out.ID, nil
}
