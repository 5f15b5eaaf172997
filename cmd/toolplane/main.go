// Command toolplane is the control plane every agent tool call passes
// through. This file only wires the process to the cli package.
package main

import (
	"os"

	"github.com/toolplane/toolplane/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
