package main_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// chaosNode is one `toolplane serve` process that the chaos test kills
// with SIGKILL and starts again: on the same address, database and data
// directory each time, as a supervisor would restart it.
type chaosNode struct {
	name     string
	addr     string // host:port, fixed across restarts
	database string // a SQLite file or a PostgreSQL DSN
	dataDir  string
	args     []string // further serve flags
	env      []string // further environment, KEY=value

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan error
	out     *syncbuf.Buffer
	starts  int
	history strings.Builder // the output of earlier lives, for a failure's log
}

// freeAddr answers a loopback address nothing listens on now; a node
// keeps it for all its lives.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start launches the node and waits until it answers /readyz.
func (n *chaosNode) start(bin string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s is running", n.name)
	}
	args := append([]string{"serve", "--addr", n.addr, "--database", n.database, "--data", n.dataDir}, n.args...)
	out := &syncbuf.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	n.cmd, n.exited, n.out = cmd, exited, out
	n.starts++
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + n.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			n.cmd = nil
			return fmt.Errorf("%s exited while starting: %v\n%s", n.name, err, out)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer /readyz within 30s:\n%s", n.name, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the node with SIGKILL: nothing is flushed, no call finishes.
func (n *chaosNode) kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s is not running", n.name)
	}
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-n.exited
	fmt.Fprintf(&n.history, "--- %s life %d (SIGKILLed):\n%s\n", n.name, n.starts, tail(n.out.String()))
	n.cmd = nil
	return nil
}

// running reports whether the node has a live process.
func (n *chaosNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// stop ends the node with SIGTERM and checks it stopped gracefully: its
// queued audit events are then stored.
func (n *chaosNode) stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	var err error
	select {
	case err = <-n.exited:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
		err = errors.New("no exit within 30s of SIGTERM")
	}
	n.cmd = nil
	if err == nil && !strings.Contains(n.out.String(), "toolplane stopped") {
		err = errors.New("no graceful stop reported")
	}
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", n.name, err, n.out)
	}
	return nil
}

// logs answers the output of every life of the node.
func (n *chaosNode) logs() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.history.String()
	if n.out != nil && n.cmd != nil {
		s += fmt.Sprintf("--- %s life %d (running):\n%s\n", n.name, n.starts, tail(n.out.String()))
	}
	return s
}

// tail keeps the end of a life's output, where a failure's cause is.
func tail(s string) string {
	const keep = 4000
	if len(s) <= keep {
		return s
	}
	return "…" + s[len(s)-keep:]
}

// readCredentials reads KEY=value lines of a first start's credentials.env.
func readCredentials(dir string) (map[string]string, error) {
	b, err := os.ReadFile(dir + "/credentials.env")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		out[k] = v
	}
	return out, nil
}
