package cli

import "runtime/debug"

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
