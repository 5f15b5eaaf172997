package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// FetchProfile takes a CPU profile of window (whole seconds, at least one)
// from a server exposing net/http/pprof at base (e.g.
// http://127.0.0.1:6060) and writes it to path, for `go tool pprof`.
// Meant as Options.During, so the profile covers the measured window.
func FetchProfile(ctx context.Context, base string, window time.Duration, path string) error {
	secs := max(1, int(window/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), nil)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile: %s answered %d: %s", base, resp.StatusCode, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}
