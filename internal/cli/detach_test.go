package cli

import (
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeHoldsNoOtherCommand checks that once serve runs, the tree it
// runs in holds serve alone, and that the other commands (their flag sets)
// are freed while it serves.
func TestServeHoldsNoOtherCommand(t *testing.T) {
	t.Parallel()
	root := newRoot(&app{stdout: io.Discard, stderr: io.Discard, getenv: os.Getenv})
	serveCmd, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	others := root.Commands()
	if len(others) < 2 {
		t.Fatalf("the tree has %d commands", len(others))
	}
	var freed atomic.Int32
	for _, c := range others {
		if c != serveCmd {
			runtime.AddCleanup(c, func(struct{}) { freed.Add(1) }, struct{}{})
		}
	}
	want := int32(len(others) - 1)
	others = nil
	detachOthers(serveCmd)
	if got := root.Commands(); len(got) != 1 || got[0] != serveCmd {
		t.Fatalf("the tree holds %d commands after serve detached the others", len(got))
	}
	deadline := time.Now().Add(5 * time.Second)
	for freed.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d other commands freed while serve holds the tree", freed.Load(), want)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(root)
}
