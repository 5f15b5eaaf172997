package auditexport

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
)

// FileConfig is what a Files sink is built from; Dir is required.
type FileConfig struct {
	// Dir is the directory the files are written in (made if absent).
	Dir string
	// MaxBytes rotates a file once it holds at least this much (zero:
	// 64 MiB).
	MaxBytes int64
	// MaxAge rotates a file once it is this old (zero: one hour), so a
	// quiet trail still closes files a collector can pick up.
	MaxAge time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Files is a sink writing events as JSON Lines (one event's JSON a line)
// to files in a directory, rotated by size and age. A file's name is
// audit-<UTC time it was opened>-<sequence>.jsonl, so the names sort in
// the order the files were written; the file being written is the last.
// A batch is synced to disk before Send answers, so what the outbox
// forgets is on disk. A restart opens a new file: a batch sent again
// after a crash (at least once) may then appear in two files, each line
// carrying the event's id to deduplicate by.
type Files struct {
	cfg  FileConfig
	mu   sync.Mutex
	f    *os.File
	size int64
	at   time.Time
	seq  int
}

// NewFiles answers a Files sink over cfg.Dir, making the directory.
func NewFiles(cfg FileConfig) (*Files, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: the audit export directory is required", toolplane.ErrInvalid)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 64 << 20
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("audit export directory: %w", err)
	}
	return &Files{cfg: cfg}, nil
}

// Name is "files": one directory sink a deployment, whatever its path
// (a path moved between restarts resumes where the last one stopped).
func (s *Files) Name() string { return "files" }

// Send appends events to the current file, rotating first when it is
// full or old, and syncs it.
func (s *Files) Send(_ context.Context, events []*toolplane.AuditEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	if s.f != nil && (s.size >= s.cfg.MaxBytes || now.Sub(s.at) >= s.cfg.MaxAge) {
		if err := s.closeFile(); err != nil {
			return err
		}
	}
	if s.f == nil {
		if err := s.open(now); err != nil {
			return err
		}
	}
	var buf []byte
	for _, ev := range events {
		line, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("encode audit event %s: %w", ev.ID, err)
		}
		buf = append(append(buf, line...), '\n')
	}
	n, err := s.f.Write(buf)
	s.size += int64(n)
	if err != nil {
		return fmt.Errorf("write %s: %w", s.f.Name(), err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", s.f.Name(), err)
	}
	return nil
}

// open starts a new file, and syncs the directory so the file's name
// survives a crash as its contents do.
func (s *Files) open(now time.Time) error {
	s.seq++
	name := filepath.Join(s.cfg.Dir, fmt.Sprintf("audit-%s-%06d.jsonl", now.UTC().Format("20060102T150405.000000000Z"), s.seq))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("open audit export file: %w", err)
	}
	if d, err := os.Open(s.cfg.Dir); err == nil {
		d.Sync()
		d.Close()
	}
	s.f, s.size, s.at = f, 0, now
	return nil
}

func (s *Files) closeFile() error {
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("close audit export file: %w", err)
	}
	return nil
}

// Close closes the current file.
func (s *Files) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	return s.closeFile()
}
