package notify_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
)

// The console accepts a value with exactly these methods.
var _ interface {
	Check(token, approvalID string) error
	Use(ctx context.Context, token, approvalID string) error
} = (*notify.Links)(nil)

func TestLinks(t *testing.T) {
	t.Parallel()
	st := newStoreOnly(t)
	keys := keyring(t)
	var clock atomic.Int64
	clock.Store(time.Now().Unix())
	now := func() time.Time { return time.Unix(clock.Load(), 0) }
	links, err := notify.NewLinks(keys, st, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := notify.NewLinks(keyring(t), st, time.Hour, now)
	tok, err := links.Sign("org-1", "apr_1", "nch_1", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := other.Sign("org-1", "apr_1", "nch_1", time.Time{})
	payload, sig, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	retargeted := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "apr_1", "apr_2", 1))) + "." + sig
	for _, tt := range []struct {
		name, token, approval string
		want                  error
	}{
		{"good", tok, "apr_1", nil},
		{"another approval", tok, "apr_2", notify.ErrLinkInvalid},
		{"signed under another deployment's keys", forged, "apr_1", notify.ErrLinkInvalid},
		{"payload altered to another approval", retargeted, "apr_2", notify.ErrLinkInvalid},
		{"garbage", "not-a-token", "apr_1", notify.ErrLinkInvalid},
		{"empty", "", "apr_1", notify.ErrLinkInvalid},
		{"signature cut", payload + ".", "apr_1", notify.ErrLinkInvalid},
	} {
		if err := links.Check(tt.token, tt.approval); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: Check = %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := links.Use(t.Context(), tok, "apr_1"); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if err := links.Use(t.Context(), tok, "apr_1"); !errors.Is(err, notify.ErrLinkUsed) || !errors.Is(err, toolplane.ErrConflict) {
		t.Fatalf("second use = %v, want ErrLinkUsed", err)
	}
	// Used at once from many places (a scanner and a person): one wins.
	tok2, _ := links.Sign("org-1", "apr_1", "nch_1", time.Time{})
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if links.Use(t.Context(), tok2, "apr_1") == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d concurrent uses succeeded, want 1", wins.Load())
	}
	// Expiry: the signer's lifetime, or the approval's if sooner.
	short, _ := links.Sign("org-1", "apr_1", "nch_1", now().Add(time.Minute))
	clock.Add(61)
	if err := links.Check(short, "apr_1"); !errors.Is(err, notify.ErrLinkExpired) {
		t.Errorf("link past the approval's expiry: %v", err)
	}
	if err := links.Check(tok2, "apr_1"); err != nil {
		t.Errorf("link within its hour: %v", err)
	}
	clock.Add(3600)
	if err := links.Use(t.Context(), tok2, "apr_1"); !errors.Is(err, notify.ErrLinkExpired) {
		t.Errorf("expired link used: %v", err)
	}
}
