package loadtest

import (
	"os"
	"os/exec"
	"time"
)

// interrupt ends a started helper process: SIGINT (a fast stop for every
// server the harness starts; nothing is in flight when it is asked), a
// kill after 5 s, and a wait for exited, which whoever waits for cmd
// closes once Wait returned. A process that exited already is left.
func interrupt(cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}
