package clientcert

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Revocations is the list of revoked certificate serials, read from a
// file the operator keeps: one serial a line, in hex (colons, spaces and
// a 0x prefix allowed, as tools print them; case ignored), blank lines and
// lines starting with # ignored. The file is looked at again at most once
// per Interval, on use, and a changed file is read whole; a file that no
// longer reads keeps the list last read (logged): a list that vanished is
// a mistake to fix, not a reason to let revoked certificates back in nor
// to refuse every workload.
type Revocations struct {
	file string
	// Interval is how often, at most, the file is looked at again; zero
	// is DefaultInterval.
	Interval time.Duration
	log      *slog.Logger

	serials atomic.Pointer[map[string]struct{}]
	checked atomic.Int64

	mu    sync.Mutex
	stamp fileStamp
}

// DefaultInterval is how often, at most, the revocation file is looked at.
const DefaultInterval = time.Second

type fileStamp struct {
	size int64
	mod  time.Time
}

// LoadRevocations reads file, or answers why it cannot be read (a line
// that is not a serial is named by its number). log receives the
// failures of later reads; nil is slog.Default().
func LoadRevocations(file string, log *slog.Logger) (*Revocations, error) {
	r := &Revocations{file: file, log: logger(log)}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	set, err := readSerials(file)
	if err != nil {
		return nil, err
	}
	r.serials.Store(&set)
	r.stamp = fileStamp{fi.Size(), fi.ModTime()}
	r.checked.Store(time.Now().UnixNano())
	return r, nil
}

// Has reports whether serial (as Serial answers it) is revoked. A nil
// list revokes nothing.
func (r *Revocations) Has(serial string) bool {
	if r == nil {
		return false
	}
	r.maybeReload(time.Now())
	_, ok := (*r.serials.Load())[serial]
	return ok
}

// Len answers how many serials are revoked.
func (r *Revocations) Len() int { return len(*r.serials.Load()) }

func (r *Revocations) maybeReload(now time.Time) {
	every := r.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	last := r.checked.Load()
	if now.UnixNano()-last < int64(every) || !r.checked.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	r.Reload()
}

// Reload reads the file again when it changed since the last read.
func (r *Revocations) Reload() {
	r.mu.Lock()
	defer r.mu.Unlock()
	fi, err := os.Stat(r.file)
	if err != nil {
		if r.stamp != (fileStamp{}) {
			r.log.Error("client certificate revocation list cannot be read; the list last read is kept", "file", r.file, "err", err)
			r.stamp = fileStamp{}
		}
		return
	}
	stamp := fileStamp{fi.Size(), fi.ModTime()}
	if stamp == r.stamp {
		return
	}
	r.stamp = stamp
	set, err := readSerials(r.file)
	if err != nil {
		r.log.Error("client certificate revocation list not reloaded; the list last read is kept", "file", r.file, "err", err)
		return
	}
	r.serials.Store(&set)
	r.log.Info("client certificate revocation list reloaded", "file", r.file, "serials", len(set))
}

// readSerials reads a revocation file.
func readSerials(file string) (map[string]struct{}, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	set := map[string]struct{}{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := ParseSerial(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		set[s] = struct{}{}
	}
	return set, sc.Err()
}

// ParseSerial answers a serial number written in hex (with colons,
// spaces or a 0x prefix, as openssl and step print them) in the form
// Serial answers.
func ParseSerial(text string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(text))
	t = strings.TrimPrefix(t, "0x")
	t = strings.NewReplacer(":", "", " ", "").Replace(t)
	n, ok := new(big.Int).SetString(t, 16)
	if !ok || t == "" || n.Sign() < 0 {
		return "", fmt.Errorf("%q is not a serial number in hex", text)
	}
	return n.Text(16), nil
}
