package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Toolplane is a `toolplane serve --demo` process started for a run.
type Toolplane struct {
	// URL is where it serves (REST under /v1, MCP at /mcp); AgentKey and
	// AdminKey are the demo agent's and the administrator's keys its first
	// start minted.
	URL, AgentKey, AdminKey string
	// Dir holds its database, credentials and log (toolplane.log).
	Dir string

	cmd       *exec.Cmd
	exited    chan struct{}
	removeDir bool
}

// ToolplaneOptions say how to get and start the binary.
type ToolplaneOptions struct {
	// Binary is a toolplane binary to run; empty builds one from Source.
	Binary string
	// Source is the module directory to build ./cmd/toolplane from;
	// empty means the current directory.
	Source string
	// Dir is where the database, credentials, binary and log go; empty
	// makes a temporary directory, removed by Stop.
	Dir string
	// Args are added to serve's arguments, e.g. a federation's upstream.
	Args []string
	// Env is added to the process's environment.
	Env []string
}

// servingLine is what serve prints once it listens.
var servingLine = regexp.MustCompile(`^toolplane serving .* on (http://\S+)`)

// StartToolplane builds (unless given a binary) and starts
//
//	toolplane serve --demo --addr 127.0.0.1:0 --database DIR/toolplane.db --data DIR --rate-limit 0 --mcp-sessions-per-key 100000 ARGS...
//
// and answers once it serves, with the demo agent's key. The rate limit is
// off because a closed loop at full speed would otherwise measure the
// limiter's refusals (600 per minute per key by default), and the sessions
// one key may hold are raised because every client of a run is one key
// with a session of its own (64 per key by default).
func StartToolplane(ctx context.Context, o ToolplaneOptions) (_ *Toolplane, err error) {
	dir, temp := o.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "toolplane-load-"); err != nil {
			return nil, fmt.Errorf("toolplane: %w", err)
		}
		temp = true
	}
	defer func() {
		if err != nil && temp {
			os.RemoveAll(dir)
		}
	}()
	bin := o.Binary
	if bin == "" {
		if bin, err = BuildToolplane(ctx, o.Source, dir); err != nil {
			return nil, err
		}
	}
	logFile, err := os.Create(filepath.Join(dir, "toolplane.log"))
	if err != nil {
		return nil, fmt.Errorf("toolplane: log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor
	args := append([]string{"serve", "--demo", "--addr", "127.0.0.1:0",
		"--database", filepath.Join(dir, "toolplane.db"), "--data", dir, "--rate-limit", "0", "--mcp-sessions-per-key", "100000"}, o.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), o.Env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("toolplane: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("toolplane: start %s: %w", bin, err)
	}
	tp := &Toolplane{Dir: dir, cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(tp.exited)
	}()
	fail := func(format string, a ...any) (*Toolplane, error) {
		tp.stop()
		return nil, fmt.Errorf("toolplane: "+format+"; its log ends:\n%s", append(a, logTail(filepath.Join(dir, "toolplane.log")))...)
	}
	select {
	case tp.URL = <-found:
	case <-tp.exited:
		return fail("exited before serving")
	case <-time.After(2 * time.Minute):
		return fail("did not say where it serves within 2 minutes")
	case <-ctx.Done():
		return fail("%v", ctx.Err())
	}
	creds := filepath.Join(dir, "credentials.env")
	if tp.AgentKey, err = readEnvFile(creds, "TOOLPLANE_DEMO_AGENT_KEY"); err != nil {
		return fail("%v", err)
	}
	if tp.AdminKey, err = readEnvFile(creds, "TOOLPLANE_ADMIN_KEY"); err != nil {
		return fail("%v", err)
	}
	if temp {
		tp.removeDir = true
	}
	return tp, nil
}

// PID answers the server's process id.
func (tp *Toolplane) PID() int { return tp.cmd.Process.Pid }

// BuildToolplane builds ./cmd/toolplane of the module in source into dir
// and answers the binary's path. The binary is built without the race
// detector or coverage whatever the caller runs under, so it measures what
// ships.
func BuildToolplane(ctx context.Context, source, dir string) (string, error) {
	if source == "" {
		source = "."
	}
	bin := filepath.Join(dir, "toolplane")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/toolplane")
	cmd.Dir = source
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("toolplane: go build ./cmd/toolplane in %s: %w\n%s", source, err, out)
	}
	return bin, nil
}

// Stop interrupts the process, as an operator's Ctrl-C would, so it shuts
// down gracefully; after 15 s it is killed. A temporary directory is then
// removed.
func (tp *Toolplane) Stop() error {
	err := tp.stop()
	if tp.removeDir {
		if rerr := os.RemoveAll(tp.Dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("toolplane: remove %s: %w", tp.Dir, rerr))
		}
	}
	return err
}

func (tp *Toolplane) stop() error {
	select {
	case <-tp.exited:
		return nil
	default:
	}
	if err := tp.cmd.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("toolplane: interrupt: %w", err)
	}
	select {
	case <-tp.exited:
		return nil
	case <-time.After(15 * time.Second):
		_ = tp.cmd.Process.Kill()
		<-tp.exited
		return errors.New("toolplane: did not stop within 15s of an interrupt; killed")
	}
}

// MintAgentKey grants the agent identity subject tools (names or glob
// patterns) and creates a key for it, through toolplane's REST API at base
// with a platform admin's key, and answers the key. A federated upstream's
// tools are named mcp.<slug>.<name>, which the demo agent is not granted.
func MintAgentKey(ctx context.Context, base, adminKey, subject string, tools []string) (string, error) {
	for _, pattern := range tools {
		if _, err := adminPost(ctx, base, adminKey, "/v1/grants", map[string]any{"agent_id": subject, "pattern": pattern}); err != nil {
			return "", fmt.Errorf("grant %s %s: %w", subject, pattern, err)
		}
	}
	b, err := adminPost(ctx, base, adminKey, "/v1/keys", map[string]any{"kind": "agent", "subject": subject, "tools": tools, "label": "toolplane-load"})
	if err != nil {
		return "", fmt.Errorf("mint key: %w", err)
	}
	var out struct {
		Key string `json:"key"`
	}
	if json.Unmarshal(b, &out) != nil || out.Key == "" {
		return "", fmt.Errorf("mint key: no key in %s", clip(b))
	}
	return out.Key, nil
}

// adminPost posts body as JSON to path on base with key, and answers the
// response body of a 201.
func adminPost(ctx context.Context, base, key, path string, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, clip(b))
	}
	return b, nil
}

// readEnvFile answers name's value in a file of NAME=value lines.
func readEnvFile(path, name string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+"="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s holds no %s", path, name)
}

// logTail answers the last lines of a log, to say why a process failed.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-20):], []byte("\n")))
}
