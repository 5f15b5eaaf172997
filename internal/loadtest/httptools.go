package loadtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// The http runtime's tools the http targets call, and the connection and
// grant a toolplane needs to answer them.
const (
	// HTTPReadTool GETs the JSON API's item.
	HTTPReadTool = "load.get_item"
	// HTTPWriteTool POSTs the JSON API's item.
	HTTPWriteTool = "load.put_item"
	// HTTPProvider is the provider both tools declare, and the
	// connection's.
	HTTPProvider = "loadapi"
	// httpAgent is the agent identity granted the tools.
	httpAgent = "toolplane-load-http"
)

// httpToolFiles answers the definitions of the two tools against the API
// at base, by file name, in toolplane's own form.
func httpToolFiles(base string) map[string]string {
	return map[string]string{
		"get_item.yaml": httpToolDef(HTTPReadTool, "read", "GET", "", base, 5*time.Second),
		"put_item.yaml": httpToolDef(HTTPWriteTool, "write", "POST", "repeatable: false\n", base, 5*time.Second),
	}
}

// httpToolDef answers the definition of a tool that sends method to the
// item path of the API at base, with the lines of extra at its top level.
func httpToolDef(name, effect, method, extra, base string, timeout time.Duration) string {
	return fmt.Sprintf(`name: %s
version: 1.0.0
description: %s the item of the load generator's JSON API.
kind: internal
effect: %s
%sconnection: %s
timeout: %s
owner: load
binding:
  http:
    method: %s
    url: %s%s{id}
input_schema:
  type: object
  additionalProperties: false
  required: [id]
  properties:
    id: {type: string, pattern: "^[a-z0-9_]{1,32}$"}
output_schema:
  type: object
  required: [id]
  properties:
    id: {type: string}
    name: {type: string}
    price_cents: {type: integer}
    in_stock: {type: boolean}
`, name, map[string]string{"read": "Read", "write": "Write"}[effect], effect, extra, HTTPProvider, timeout, method, base, itemPath)
}

// WriteHTTPTools writes the definitions of the http tools, calling the
// JSON API at base (http://127.0.0.1:PORT), into dir, for serve's --tools.
func WriteHTTPTools(dir, base string) error {
	if u, err := url.Parse(base); err != nil || u.Scheme != "http" || u.Host == "" || u.Path != "" {
		return fmt.Errorf("http tools: %q is not an API's base URL", base)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("http tools: %w", err)
	}
	for name, text := range httpToolFiles(base) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return fmt.Errorf("http tools: %w", err)
		}
	}
	return nil
}

// SetUpHTTPTools creates, through toolplane's REST API at base with a
// platform admin's key, the static bearer connection the http tools
// release (its token the API's, its egress allowing 127.0.0.1 only), and
// a key for an agent granted both tools, and answers that key.
func SetUpHTTPTools(ctx context.Context, base, adminKey, apiToken string) (string, error) {
	body := map[string]any{
		"name": "load-api", "provider": HTTPProvider, "kind": "static",
		"config": map[string]any{"egress": map[string]any{"hosts": []string{"127.0.0.1"}, "allow_cidrs": []string{"127.0.0.1/32"}}},
		// The token goes to toolplane in the request body, never into
		// an error: adminPost quotes only the answer.
		"secrets": map[string]any{"token": apiToken},
	}
	if _, err := adminPost(ctx, base, adminKey, "/v1/connections", body); err != nil {
		return "", fmt.Errorf("http tools: create the connection: %w", err)
	}
	key, err := MintAgentKey(ctx, base, adminKey, httpAgent, []string{HTTPReadTool, HTTPWriteTool})
	if err != nil {
		return "", fmt.Errorf("http tools: %w", err)
	}
	return key, nil
}
