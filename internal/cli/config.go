package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/toolplane/toolplane/apikey"
	"go.yaml.in/yaml/v3"
)

// config is the command line's file of contexts: each a server and the key
// to use there, one of them current.
type config struct {
	CurrentContext string          `yaml:"current-context,omitempty" json:"current_context,omitempty"`
	Contexts       []configContext `yaml:"contexts" json:"contexts"`
}

// configContext is one server and the key used there.
type configContext struct {
	Name   string `yaml:"name" json:"name"`
	Server string `yaml:"server" json:"server"`
	Key    string `yaml:"key,omitempty" json:"key,omitempty"`
}

func (c *config) find(name string) *configContext {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

// configFile answers where the config file is:
// $XDG_CONFIG_HOME/toolplane/config.yaml, else ~/.config/toolplane/config.yaml.
func configFile(getenv func(string) string) (string, error) {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return "", errors.New("neither $XDG_CONFIG_HOME nor $HOME is set: no place for the config file")
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "toolplane", "config.yaml"), nil
}

// loadConfig reads the config file; a missing file, or no place for one,
// is an empty config (file "" in the latter case).
func loadConfig(getenv func(string) string) (*config, string, error) {
	file, err := configFile(getenv)
	if err != nil {
		return &config{}, "", nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return &config{}, file, nil
	}
	if err != nil {
		return nil, file, fmt.Errorf("read the config file: %w", err)
	}
	var c config
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, file, fmt.Errorf("the config file %s: %w", file, err)
	}
	return &c, file, nil
}

// save writes c to file readable by its owner only: it holds keys.
func (c *config) save(file string) error {
	if file == "" {
		return errors.New("neither $XDG_CONFIG_HOME nor $HOME is set: no place for the config file")
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("create the config directory: %w", err)
	}
	// Written beside and renamed into place, so a reader never sees half
	// a file and an older, wider mode never survives.
	tmp, err := os.CreateTemp(filepath.Dir(file), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("write the config file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write the config file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the config file: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write the config file: %w", err)
	}
	return nil
}

// maskKey shows a key by its id, never its secret.
func maskKey(key string) string {
	if key == "" {
		return "-"
	}
	if id, _, err := apikey.Parse(key); err == nil {
		return id + "_…"
	}
	return "…"
}

func newLoginCmd(a *app) *cobra.Command {
	var server, key, name string
	var noVerify bool
	cmd := &cobra.Command{
		Use:   "login --server URL --key KEY [--context NAME] [--no-verify]",
		Short: "check a server and key, save them as a context of the config file, and make it current",
		Long: `login asks the server to authenticate the key (GET /v1/tools) and, when it does,
saves the server and the key as a context of the config file
($XDG_CONFIG_HOME/toolplane/config.yaml, readable by you only) and makes it the
current context, so later commands need neither --server nor --key. A server
that cannot be reached, that is not toolplane, or that refuses the key leaves
the config file as it was. --no-verify saves without asking (offline).`,
		Args: exactArgs(0, "no arguments"),
	}
	cmd.Flags().StringVar(&server, "server", "", "the toolplane server (default "+DefaultServer+")")
	cmd.Flags().StringVar(&key, "key", "", "the API key to use there (required)")
	cmd.Flags().StringVar(&name, "context", "default", "the context's name")
	cmd.Flags().BoolVar(&noVerify, "no-verify", false, "save without checking that the server answers and accepts the key (offline)")
	cmd.RunE = action(func(cmd *cobra.Command, _ []string) error {
		if strings.TrimSpace(key) == "" {
			return usageErr("--key is required and must not be empty")
		}
		if cmd.Flags().Changed("server") && strings.TrimSpace(server) == "" {
			return usageErr("--server is empty")
		}
		if server == "" {
			server = DefaultServer
		}
		if name == "" {
			return usageErr("--context is empty")
		}
		cfg, file, err := loadConfig(a.getenv)
		if err != nil {
			return err
		}
		verified := ""
		if !noVerify {
			if err := verifyLogin(cmd.Context(), strings.TrimRight(server, "/"), key); err != nil {
				return err
			}
			verified = ", key accepted,"
		}
		if c := cfg.find(name); c != nil {
			c.Server, c.Key = strings.TrimRight(server, "/"), key
		} else {
			cfg.Contexts = append(cfg.Contexts, configContext{Name: name, Server: strings.TrimRight(server, "/"), Key: key})
		}
		cfg.CurrentContext = name
		if err := cfg.save(file); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "context %q (%s)%s saved in %s and made current\n", name, server, verified, file)
		return nil
	})
	return cmd
}

// verifyLogin checks that server is a toolplane server that accepts key:
// one authenticated read every credential may make. An answer of the
// server refusing the key, or of something that is not toolplane, is an
// error saying which; a key the server knows but whose roles do not allow
// the read (403) is accepted, since it authenticated.
func verifyLogin(ctx context.Context, server, key string) error {
	t := target{server: server, serverFrom: "--server", key: key, keyFrom: "--key"}
	data, err := t.call(ctx, "GET", "/v1/tools", nil, "")
	var ae *APIError
	switch {
	case err == nil:
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if json.Unmarshal(data, &list) != nil || list.Items == nil {
			return fmt.Errorf("not saved: %s does not answer as a toolplane server (GET /v1/tools is not a tool list; or save it anyway with --no-verify)", server)
		}
		return nil
	case errors.As(err, &ae) && ae.Status == http.StatusForbidden:
		return nil
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		return fmt.Errorf("not saved: %w (or save it anyway with --no-verify)", err)
	case errors.As(err, &ae):
		return fmt.Errorf("not saved: %s does not answer as a toolplane server: %w (or save it anyway with --no-verify)", server, err)
	case errors.Is(err, ErrUnreachable):
		return fmt.Errorf("not saved: %w (or save it anyway, offline, with --no-verify)", err)
	}
	return fmt.Errorf("not saved: %s does not answer as a toolplane server: %w (or save it anyway with --no-verify)", server, err)
}

func newConfigCmd(a *app) *cobra.Command {
	use := &cobra.Command{
		Use:   "use-context NAME",
		Short: "make a context of the config file the current one",
		Args:  exactArgs(1, "NAME"),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			cfg, _, err := loadConfig(a.getenv)
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			var names []string
			for _, c := range cfg.Contexts {
				names = append(names, c.Name)
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	}
	use.RunE = action(func(_ *cobra.Command, args []string) error {
		cfg, file, err := loadConfig(a.getenv)
		if err != nil {
			return err
		}
		if cfg.find(args[0]) == nil {
			return fmt.Errorf("no context %q in %s (toolplane config get-contexts lists them)", args[0], file)
		}
		cfg.CurrentContext = args[0]
		if err := cfg.save(file); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "current context: %s\n", args[0])
		return nil
	})
	get := &cobra.Command{
		Use:   "get-contexts",
		Short: "list the config file's contexts (keys shown by their id only)",
		Args:  exactArgs(0, "no arguments"),
	}
	out := addOutput(get)
	get.RunE = action(func(_ *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		cfg, _, err := loadConfig(a.getenv)
		if err != nil {
			return err
		}
		shown := config{CurrentContext: cfg.CurrentContext, Contexts: make([]configContext, len(cfg.Contexts))}
		for i, c := range cfg.Contexts {
			shown.Contexts[i] = configContext{Name: c.Name, Server: c.Server, Key: maskKey(c.Key)}
		}
		if out.format != "table" {
			return printValue(a, out, shown)
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tKEY")
		for _, c := range shown.Contexts {
			cur := ""
			if c.Name == cfg.CurrentContext {
				cur = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cur, c.Name, c.Server, c.Key)
		}
		return tw.Flush()
	})
	return group(&cobra.Command{Use: "config", Short: "the contexts of the config file (servers and keys)"}, use, get)
}
