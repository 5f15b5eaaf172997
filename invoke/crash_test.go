package invoke_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

const (
	crashDBEnv     = "TOOLPLANE_CRASH_DB"
	crashMarkerEnv = "TOOLPLANE_CRASH_MARKER"
	crashReplayEnv = "TOOLPLANE_CRASH_REPLAY"
)

func crashTool(replay bool) toolplane.Definition {
	return def("payments.refund", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.Timeout = toolplane.Duration(time.Minute)
		if replay {
			d.Annotations.Idempotent = true
			d.Replay = &toolplane.Replay{MaxAttempts: 2}
		}
	})
}

// crashChild is the process that gets killed: it starts the call, marks
// that its handler is running, and hangs in the handler.
func crashChild(t *testing.T) {
	s := openStore(t, os.Getenv(crashDBEnv))
	marker := os.Getenv(crashMarkerEnv)
	e := newEnv(t, s, tool{def: crashTool(os.Getenv(crashReplayEnv) == "1"), fn: func(context.Context, handler.Call, any) (any, error) {
		if err := os.WriteFile(marker, []byte("in handler\n"), 0o600); err != nil {
			panic(err)
		}
		select {} // killed here
	}})
	_, _ = e.iv.Invoke(context.Background(), "payments.refund", args("to", "ord_1"), inv("payments.refund"))
	t.Fatal("the child was not killed")
}

// TestSIGKILLDuringHandler kills a real process while its handler runs,
// then runs the identical call from a fresh invoker on the same SQLite
// file: a call that is not safe to replay is uncertain and never runs
// twice; one that is runs exactly once more.
func TestSIGKILLDuringHandler(t *testing.T) {
	if os.Getenv(crashDBEnv) != "" {
		crashChild(t)
		return
	}
	for _, replay := range []bool{false, true} {
		t.Run(fmt.Sprintf("replay=%v", replay), func(t *testing.T) {
			dir := t.TempDir()
			db, marker := filepath.Join(dir, "toolplane.db"), filepath.Join(dir, "marker")
			openStore(t, db) // migrate before the child starts
			cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLDuringHandler$", "-test.count=1")
			flag := "0"
			if replay {
				flag = "1"
			}
			cmd.Env = append(os.Environ(), crashDBEnv+"="+db, crashMarkerEnv+"="+marker, crashReplayEnv+"="+flag)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				if _, err := os.Stat(marker); err == nil {
					break
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("the child never reached its handler:\n%s", out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			s := openStore(t, db)
			e := newEnv(t, s, tool{def: crashTool(replay), fn: ok(map[string]any{"refund_id": "r-1"})})
			in := inv("payments.refund")
			// The dead worker's lease still runs: the call is in flight.
			if _, err := e.iv.Invoke(context.Background(), "payments.refund", args("to", "ord_1"), in); err == nil {
				t.Fatal("a live lease was not respected")
			}
			e.clock.Advance(5 * time.Minute) // past the lease
			r, err := e.iv.Invoke(context.Background(), "payments.refund", args("to", "ord_1"), in)
			if !replay {
				code(t, r, err, toolplane.CodeUncertain)
				if e.count("payments.refund") != 0 {
					t.Fatal("a call that may have acted ran again")
				}
				return
			}
			must(t).OK(r, err)
			r = must(t).OK(e.iv.Invoke(context.Background(), "payments.refund", args("to", "ord_1"), in))
			if e.count("payments.refund") != 1 || !r.Meta.Replayed {
				t.Fatalf("replayable call ran %d more times (want exactly 1)", e.count("payments.refund"))
			}
		})
	}
}
