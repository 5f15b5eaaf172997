package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion answers the module version the binary was built from
// (set by go install …@version) and, from a checkout, its commit.
func buildVersion() (version, commit string, modified bool) {
	version = "(devel)"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return version, "", false
	}
	if bi.Main.Version != "" {
		version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return version, commit, modified
}

func newVersionCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print the version of this binary",
		Args:  exactArgs(0, "no arguments"),
	}
	out := addOutput(cmd)
	cmd.RunE = action(func(*cobra.Command, []string) error {
		if err := out.check(); err != nil {
			return err
		}
		v, commit, modified := buildVersion()
		info := map[string]any{"version": v, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
		if commit != "" {
			info["commit"] = commit
			info["modified"] = modified
		}
		if out.format == "table" {
			line := "toolplane " + v
			if commit != "" {
				line += " (" + commit
				if modified {
					line += ", modified"
				}
				line += ")"
			}
			fmt.Fprintf(a.stdout, "%s %s %s\n", line, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
			return nil
		}
		return printValue(a, out, info)
	})
	return cmd
}
