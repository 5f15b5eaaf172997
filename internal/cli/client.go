package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// clientConfigs are the MCP clients toolplane prints a configuration for,
// each with where its file lives.
var clientConfigs = map[string]string{
	"claude-desktop": "claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\, Linux: ~/.config/Claude/)",
	"cursor":         "~/.cursor/mcp.json, or .cursor/mcp.json in a project",
	"vscode":         ".vscode/mcp.json in a workspace",
}

func newClientCmd(a *app) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:       "config claude-desktop|cursor|vscode",
		Short:     "print the configuration an MCP client needs to reach this server's /mcp with an agent's key",
		Long:      "Prints the JSON to merge into the client's configuration file, with the server's /mcp endpoint and the key (from --key, $TOOLPLANE_KEY or the context) as a Bearer token. The key is written into the output: keep the file private, and use an agent's key, narrowed to what the client should call.",
		Args:      exactArgs(1, "claude-desktop, cursor or vscode"),
		ValidArgs: []string{"claude-desktop", "cursor", "vscode"},
	}
	r := addRemote(a, cmd)
	cmd.Flags().StringVar(&name, "name", "toolplane", "the server's name in the client's configuration")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		where, ok := clientConfigs[args[0]]
		if !ok {
			return usageErr("unknown client %q: want claude-desktop, cursor or vscode", args[0])
		}
		if strings.TrimSpace(name) == "" {
			return usageErr("--name is empty")
		}
		t, err := r.resolve(cmd)
		if err != nil {
			return err
		}
		doc := clientConfig(args[0], name, t.server+"/mcp", t.key)
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "merge into %s:\n", where)
		fmt.Fprintf(a.stdout, "%s\n", b)
		return nil
	})
	return group(&cobra.Command{Use: "client", Short: "configurations for MCP clients"}, cmd)
}

// clientConfig answers the configuration document of one client for the
// endpoint and key. Claude Desktop runs stdio servers only, so it reaches
// the endpoint through mcp-remote; its header argument has no space, which
// Claude Desktop on Windows would split, and plain http to another host
// needs mcp-remote's --allow-http.
func clientConfig(client, name, endpoint, key string) map[string]any {
	switch client {
	case "claude-desktop":
		args := []string{"-y", "mcp-remote", endpoint, "--header", "Authorization:${TOOLPLANE_AUTH}"}
		if u, err := url.Parse(endpoint); err == nil && u.Scheme == "http" && u.Hostname() != "localhost" && u.Hostname() != "127.0.0.1" && u.Hostname() != "::1" {
			args = append(args, "--allow-http")
		}
		return map[string]any{"mcpServers": map[string]any{name: map[string]any{
			"command": "npx", "args": args, "env": map[string]string{"TOOLPLANE_AUTH": "Bearer " + key}}}}
	case "cursor":
		return map[string]any{"mcpServers": map[string]any{name: map[string]any{
			"url": endpoint, "headers": map[string]string{"Authorization": "Bearer " + key}}}}
	default: // vscode
		return map[string]any{"servers": map[string]any{name: map[string]any{
			"type": "http", "url": endpoint, "headers": map[string]string{"Authorization": "Bearer " + key}}}}
	}
}
