package readme

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// block is one ```sh block of the README and what its marker asks.
type block struct {
	line     int // of the opening fence, 1-based
	kind     string
	postgres bool
	expect   []string
	text     string
}

var (
	markerRe = regexp.MustCompile(`^<!-- readme-test: (run|serve|skip)\b(.*?)-->\s*$`)
	expectRe = regexp.MustCompile(`expect=(?:"([^"]*)"|'([^']*)')`)
)

// parse reads the README's sh blocks and their markers. A sh block
// without a marker, or a marker not followed by one, is an error.
func parse(readme []byte) ([]block, error) {
	var blocks []block
	var pending *block
	sc := bufio.NewScanner(bytes.NewReader(readme))
	n := 0
	var cur *block
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case cur != nil:
			if strings.HasPrefix(l, "```") {
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			cur.text += l + "\n"
		case markerRe.MatchString(l):
			if pending != nil {
				return nil, fmt.Errorf("README.md:%d: a readme-test marker not followed by a sh block", pending.line)
			}
			m := markerRe.FindStringSubmatch(l)
			b := block{line: n, kind: m[1]}
			rest := m[2]
			for _, e := range expectRe.FindAllStringSubmatch(rest, -1) {
				b.expect = append(b.expect, e[1]+e[2])
			}
			rest = expectRe.ReplaceAllString(rest, "")
			b.postgres = b.kind != "skip" && slices.Contains(strings.Fields(rest), "postgres")
			pending = &b
		case l == "```sh":
			if pending == nil {
				return nil, fmt.Errorf("README.md:%d: a sh block without a <!-- readme-test: run|serve|skip --> marker", n)
			}
			pending.line = n
			cur, pending = pending, nil
		case pending != nil && strings.TrimSpace(l) != "":
			return nil, fmt.Errorf("README.md:%d: a readme-test marker not followed by a sh block", pending.line)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("README.md:%d: a sh block that never closes", cur.line)
	}
	return blocks, sc.Err()
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, readme string
		want         []block
		wantErr      string
	}{
		{name: "marked", readme: "x\n<!-- readme-test: run expect=\"a b\" expect='\"c\"' -->\n```sh\necho a b c\n```\n" +
			"<!-- readme-test: serve postgres -->\n\n```sh\n./toolplane serve\n```\n<!-- readme-test: skip long -->\n```sh\nsleep 9\n```\n```go\nx\n```\n",
			want: []block{{line: 3, kind: "run", expect: []string{"a b", `"c"`}, text: "echo a b c\n"},
				{line: 8, kind: "serve", postgres: true, text: "./toolplane serve\n"},
				{line: 12, kind: "skip", text: "sleep 9\n"}}},
		{name: "unmarked", readme: "x\n```sh\necho\n```\n", wantErr: "README.md:2: a sh block without"},
		{name: "dangling marker", readme: "<!-- readme-test: run -->\ntext\n```sh\n```\n", wantErr: "README.md:1: a readme-test marker not followed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parse([]byte(tc.readme))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestREADME runs README.md's blocks in order, in one bash as one shell
// session would, from a directory that looks like a fresh checkout, with
// the server its serve block starts.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the README run builds toolplane and starts servers")
	}
	for _, tool := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README's blocks need %s on PATH: %v", tool, err)
		}
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parse(text)
	if err != nil {
		t.Fatal(err)
	}
	pg := os.Getenv("TOOLPLANE_TEST_POSTGRES") != ""

	root := checkout(t, repo)
	env := cleanEnv(t, root)

	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	var run []block
	server := ""
	for _, b := range blocks {
		if b.kind == "skip" || (b.postgres && !pg) {
			t.Logf("README.md:%d: not run (%s)", b.line, skipWhy(b))
			continue
		}
		if b.kind == "serve" {
			for _, l := range strings.Split(strings.TrimSpace(b.text), "\n") {
				addr := serve(t, root, env, b.line, l, server == "")
				if server == "" {
					server = "http://" + addr
				}
			}
			continue
		}
		if server == "" {
			t.Fatalf("README.md:%d: a run block before any serve block", b.line)
		}
		fmt.Fprintf(&script, "printf '\\n@@readme-block %d@@\\n'\n%s", len(run), b.text)
		run = append(run, b)
	}
	if server == "" {
		t.Fatal("README.md has no serve block to start a server")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = root
	cmd.Env = append(env, "TOOLPLANE_SERVER="+server)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()

	// Split the output at the markers: segment i is block run[i]'s.
	segs := strings.Split(out.String(), "\n@@readme-block ")
	got := map[int]string{}
	last := -1
	for _, s := range segs[1:] {
		var i int
		if _, err := fmt.Sscanf(s, "%d@@", &i); err != nil {
			continue
		}
		_, body, _ := strings.Cut(s, "@@\n")
		got[i], last = body, i
	}
	if runErr != nil && last < 0 {
		t.Fatalf("the README's blocks failed before the first: %v\n%s", runErr, out.String())
	}
	for i, b := range run {
		if runErr != nil && i >= last {
			break // the failing block and those never reached
		}
		for _, e := range b.expect {
			if !strings.Contains(got[i], e) {
				t.Errorf("README.md:%d: the output lacks %q\n--- block ---\n%s--- output ---\n%s", b.line, e, b.text, got[i])
			}
		}
	}
	if runErr != nil {
		t.Fatalf("README.md:%d: the block failed: %v\n--- block ---\n%s--- output ---\n%s", run[last].line, runErr, run[last].text, got[last])
	}
}

func skipWhy(b block) string {
	if b.kind == "skip" {
		return "marked skip"
	}
	return "PostgreSQL: TOOLPLANE_TEST_POSTGRES is not set"
}

// checkout answers a directory that looks like a fresh clone after the
// README's build step: the repository's entries linked in (so `go run
// ./examples/...` works), the toolplane binary built, and no data.
func checkout(t *testing.T, repo string) string {
	t.Helper()
	root := t.TempDir()
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if n == ".git" || n == "toolplane" || strings.HasPrefix(n, "toolplane-data") {
			continue
		}
		if err := os.Symlink(filepath.Join(repo, n), filepath.Join(root, n)); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(root, "toolplane"), "./cmd/toolplane")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/toolplane: %v\n%s", err, out)
	}
	return root
}

// cleanEnv answers the test's environment without any TOOLPLANE_
// setting, so the README must set what it uses, and with a config
// directory of the test's own for `toolplane login`.
func cleanEnv(t *testing.T, root string) []string {
	t.Helper()
	// Keep go's own settings file where it was: XDG_CONFIG_HOME moves it.
	goenv, err := exec.Command("go", "env", "GOENV").Output()
	if err != nil {
		t.Fatalf("go env GOENV: %v", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TOOLPLANE_") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") || strings.HasPrefix(kv, "GOENV=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "XDG_CONFIG_HOME="+filepath.Join(root, ".config"), "GOENV="+strings.TrimSpace(string(goenv)))
}

// serve starts one serve line of the README on a free port, waits until
// it answers, and answers its address. The first server is kept for the
// run blocks; any other is stopped once it has shown it starts.
func serve(t *testing.T, root string, env []string, line int, l string, keep bool) string {
	t.Helper()
	if i := strings.Index(l, " #"); i >= 0 {
		l = l[:i]
	}
	// `go run ./cmd/toolplane serve` compiles what the test built as
	// ./toolplane; running the build spares a second compile.
	if rest, ok := strings.CutPrefix(l, "go run ./cmd/toolplane serve"); ok {
		l = "./toolplane serve" + rest
	}
	if !strings.HasPrefix(l, "./toolplane serve") {
		t.Fatalf("README.md:%d: a serve block line that does not start ./toolplane serve or go run ./cmd/toolplane serve: %s", line, l)
	}
	addr := freeAddr(t)
	cmd := exec.Command("bash", "-c", "exec "+l+" --addr "+addr)
	cmd.Dir = root
	cmd.Env = env
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("README.md:%d: %s: the server exited: %v\n%s", line, l, err, out.String())
		default:
		}
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("README.md:%d: %s: no answer on %s within 90s\n%s", line, l, addr, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if keep {
		t.Cleanup(func() {
			stop()
			if t.Failed() {
				t.Logf("server log (README.md:%d):\n%s", line, out.String())
			}
		})
	} else {
		stop()
	}
	return addr
}

// freeAddr answers a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
