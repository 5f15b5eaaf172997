package main_test

import (
	"context"
	"debug/elf"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// versionFlag is how a release stamps the version serve reports; the
// Dockerfile and .goreleaser.yaml must use it as written here.
const versionFlag = "-X github.com/toolplane/toolplane/internal/cli.Version="

// TestReleaseBuild builds the binary as the Dockerfile and .goreleaser.yaml
// do (CGO_ENABLED=0, the version stamped with -ldflags), checks it is
// static, and runs it with the Dockerfile's ENTRYPOINT flags (on port 0
// rather than 8080, and a temporary directory for /data): it must serve,
// write its first-start credentials beside the database, and report the
// stamped version to MCP clients.
func TestReleaseBuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	for _, file := range []string{"../../Dockerfile", "../../.goreleaser.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), versionFlag) {
			t.Errorf("%s does not stamp the version with %s", file, versionFlag)
		}
	}

	const stamped = "v9.8.7-release-test"
	dir := t.TempDir()
	bin := filepath.Join(dir, "toolplane")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", versionFlag+stamped, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if runtime.GOOS == "linux" {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		libs, _ := f.ImportedLibraries()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("the binary names a dynamic loader; want a static binary")
			}
		}
		if len(libs) > 0 {
			t.Errorf("the binary needs shared libraries %v; want a static binary", libs)
		}
		f.Close()
	}

	data := filepath.Join(dir, "data")
	var out, errOut syncbuf.Buffer
	cmd := exec.Command(bin, "serve", "--addr", "0.0.0.0:0", "--database", filepath.Join(data, "toolplane.db"), "--demo")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("the server did not stop within 20s of SIGTERM")
		}
	}()
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == ""; time.Sleep(20 * time.Millisecond) {
		if m := servingRE.FindStringSubmatch(out.String()); m != nil {
			// Listening on every interface, it reports [::]:PORT or
			// 0.0.0.0:PORT; the test reaches it on loopback.
			u, err := url.Parse(m[1])
			if err != nil {
				t.Fatal(err)
			}
			base = "http://127.0.0.1:" + u.Port()
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("serve exited before listening: %v\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not report its address within 20s:\n%s\n%s", out.String(), errOut.String())
		}
	}
	creds, err := os.ReadFile(filepath.Join(data, "credentials.env"))
	if err != nil {
		t.Fatalf("first start wrote no credentials beside the database: %v", err)
	}
	var agent string
	for line := range strings.Lines(string(creds)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "TOOLPLANE_DEMO_AGENT_KEY="); ok {
			agent = v
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "release-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{agent, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v\n%s", err, errOut.String())
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Version; got != stamped {
		t.Errorf("serverInfo.version = %q, want the stamped %q", got, stamped)
	}
}

// TestBuildsForWindows cross-compiles the binary for windows/amd64 as a
// release does (CGO_ENABLED=0): code written against a Unix-only API (such
// as syscall.O_NOFOLLOW) breaks that target alone. darwin shares the unix
// build tag with linux, so linux builds stand for it.
func TestBuildsForWindows(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cross-compiles the binary; skipped with -short")
	}
	build := exec.Command("go", "build", "-o", os.DevNull, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=windows", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=windows go build: %v\n%s", err, out)
	}
}
