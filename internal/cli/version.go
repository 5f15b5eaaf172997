package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is this build's version. A release stamps it:
//
//	go build -ldflags "-X github.com/toolplane/toolplane/cli.Version=v1.2.3" ./cmd/toolplane
//
// (the Dockerfile and .goreleaser.yaml do). Unstamped, the version is the
// one the Go toolchain recorded: the module's tag for go install …@v1.2.3,
// a pseudo-version for a build from a checkout.
var Version = ""

// version answers Version, or what the build recorded, or "devel".
func version() string {
	return resolveVersion(Version, debug.ReadBuildInfo)
}

// resolveVersion is version with its inputs passed in, so each case can be
// tested.
func resolveVersion(stamped string, info func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	if bi, ok := info(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// buildCommit answers the commit a binary built from a checkout records,
// and whether the checkout had changes ("" when none is recorded).
func buildCommit() (commit string, modified bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return commit, modified
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
		v := version()
		commit, modified := buildCommit()
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
