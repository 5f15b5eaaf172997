package signing_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signing"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
	"github.com/toolplane/toolplane/webhook"
)

func admin(org string) *toolplane.Credential {
	return &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "root@" + org,
		Roles: []string{toolplane.RolePlatformAdmin}}
}

func keyLine() string {
	b := make([]byte, secret.KeySize)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func keyring(t testing.TB, text string) *secret.Keyring {
	t.Helper()
	k, err := secret.ParseKeyring(text)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// clock is a test's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newSecrets(t testing.TB, grace time.Duration) (*signing.Secrets, *sqlite.Store, *clock) {
	t.Helper()
	st := sqlitetest.New(t)
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s, err := signing.New(signing.Config{Store: st, Keys: keyring(t, "k1 "+keyLine()), Grace: grace, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return s, st, c
}

// verifies answers whether a receiver holding key accepts what s signs
// for org now.
func verifies(t *testing.T, s *signing.Secrets, org string, key []byte, at time.Time) bool {
	t.Helper()
	body := []byte(`{"invocation_id":"inv_1"}`)
	h, err := s.Headers(t.Context(), org, "dlv_"+rand.Text(), body, at)
	if err != nil {
		t.Fatal(err)
	}
	v, err := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{key}, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	return v.Verify(t.Context(), h, body) == nil
}

func TestFirstUseMakesOneSecret(t *testing.T) {
	t.Parallel()
	s, _, _ := newSecrets(t, 0)
	var first [][]byte
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			keys, err := s.Signing(context.Background(), "org-a")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if len(keys) != 1 || !strings.HasPrefix(string(keys[0]), signing.Prefix) {
				t.Errorf("Signing = %d keys; want one current secret", len(keys))
			}
			if first == nil {
				first = keys
			} else if !bytes.Equal(first[0], keys[0]) {
				t.Error("concurrent first uses answered different secrets")
			}
		})
	}
	wg.Wait()
}

func TestRotationKeepsThePreviousForTheGrace(t *testing.T) {
	t.Parallel()
	s, st, c := newSecrets(t, time.Hour)
	ctx := t.Context()
	old, err := s.Signing(ctx, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute)
	r, err := s.Rotate(ctx, admin("org-a"))
	if err != nil {
		t.Fatal(err)
	}
	fresh := []byte(r.Secret.Reveal())
	if !strings.HasPrefix(string(fresh), signing.Prefix) || bytes.Equal(fresh, old[0]) {
		t.Fatalf("Rotate answered %q", fresh)
	}
	if r.PreviousID == "" || !r.PreviousValidUntil.Equal(c.now().Add(time.Hour)) || r.RotatedBy != "root@org-a" {
		t.Errorf("Rotate's info = %+v", r.Info)
	}
	keys, err := s.Signing(ctx, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !bytes.Equal(keys[0], fresh) || !bytes.Equal(keys[1], old[0]) {
		t.Fatalf("Signing during the grace answered %d keys; want the new then the old", len(keys))
	}
	// A receiver holding either accepts, during the grace.
	for name, key := range map[string][]byte{"old": old[0], "new": fresh} {
		if !verifies(t, s, "org-a", key, c.now()) {
			t.Errorf("a receiver holding the %s secret refused a request signed during the grace", name)
		}
	}
	c.add(time.Hour)
	if verifies(t, s, "org-a", old[0], c.now()) {
		t.Error("a receiver holding the old secret accepted a request signed after the grace")
	}
	if !verifies(t, s, "org-a", fresh, c.now()) {
		t.Error("a receiver holding the new secret refused a request signed after the grace")
	}
	w, err := st.GetWebhookSecret(ctx, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	if w.PreviousID != "" || len(w.Previous) != 0 {
		t.Errorf("the previous secret is still stored after its grace: %q", w.PreviousID)
	}
	info, err := s.Info(ctx, admin("org-a"))
	if err != nil || info.ID != r.ID || info.PreviousID != "" {
		t.Errorf("Info after the grace = %+v, %v", info, err)
	}
}

// A rotation within the grace of the one before drops the oldest secret
// at once: at most two sign.
func TestAtMostTwoSecretsSign(t *testing.T) {
	t.Parallel()
	s, _, _ := newSecrets(t, 0)
	ctx := t.Context()
	first, _ := s.Rotate(ctx, admin("org-a"))
	second, _ := s.Rotate(ctx, admin("org-a"))
	third, err := s.Rotate(ctx, admin("org-a"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := s.Signing(ctx, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || string(keys[0]) != third.Secret.Reveal() || string(keys[1]) != second.Secret.Reveal() {
		t.Fatalf("Signing answered %d keys; want the third then the second", len(keys))
	}
	for _, k := range keys {
		if string(k) == first.Secret.Reveal() {
			t.Error("the first secret still signs")
		}
	}
	if third.PreviousID != second.ID || third.PreviousValidUntil.Sub(third.CreatedAt) != signing.DefaultGrace {
		t.Errorf("third rotation's info = %+v; want the second as previous for the default grace", third.Info)
	}
}

func TestConcurrentRotationsOneWins(t *testing.T) {
	t.Parallel()
	s, _, _ := newSecrets(t, 0)
	if _, err := s.Signing(t.Context(), "org-a"); err != nil {
		t.Fatal(err)
	}
	var won, conflict atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			_, err := s.Rotate(context.Background(), admin("org-a"))
			switch {
			case err == nil:
				won.Add(1)
			case errors.Is(err, toolplane.ErrConflict):
				conflict.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won.Load() < 1 || won.Load()+conflict.Load() != 16 {
		t.Fatalf("won %d, conflicts %d", won.Load(), conflict.Load())
	}
}

func TestWhoMayRotateAndRead(t *testing.T) {
	t.Parallel()
	s, _, _ := newSecrets(t, 0)
	ctx := t.Context()
	if _, err := s.Rotate(ctx, admin("org-a")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name         string
		by           *toolplane.Credential
		rotate, read bool
	}{
		{"platform admin", admin("org-a"), true, true},
		{"auditor", &toolplane.Credential{OrganizationID: "org-a", Kind: toolplane.CredentialPerson, Roles: []string{toolplane.RoleAuditor}}, false, true},
		{"person without a role", &toolplane.Credential{OrganizationID: "org-a", Kind: toolplane.CredentialPerson}, false, false},
		{"agent", &toolplane.Credential{OrganizationID: "org-a", Kind: toolplane.CredentialAgent}, false, false},
		{"no credential", nil, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Rotate(ctx, tt.by)
			if tt.rotate != (err == nil) || !tt.rotate && !errors.Is(err, toolplane.ErrForbidden) {
				t.Errorf("Rotate = %v; want allowed %v", err, tt.rotate)
			}
			_, err = s.Info(ctx, tt.by)
			if tt.read != (err == nil) || !tt.read && !errors.Is(err, toolplane.ErrForbidden) {
				t.Errorf("Info = %v; want allowed %v", err, tt.read)
			}
		})
	}
}

// One organization never signs with, reads or opens another's secret:
// sealed bytes copied to another organization's row do not open there.
func TestOrganizationsNeverShareASecret(t *testing.T) {
	t.Parallel()
	s, st, _ := newSecrets(t, 0)
	ctx := t.Context()
	a, err := s.Signing(ctx, "org-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Info(ctx, admin("org-b")); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("org-b's Info before any secret = %v; want not found", err)
	}
	b, err := s.Signing(ctx, "org-b")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[0], b[0]) {
		t.Fatal("two organizations sign with one secret")
	}
	wa, _ := st.GetWebhookSecret(ctx, "org-a")
	wb, _ := st.GetWebhookSecret(ctx, "org-b")
	wb.Current, wb.CurrentID = wa.Current, wa.CurrentID
	if ok, err := st.UpdateWebhookSecret(ctx, wb); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := s.Signing(ctx, "org-b"); !errors.Is(err, secret.ErrAuthentication) {
		t.Fatalf("org-a's sealed secret in org-b's row: %v; want it not to open", err)
	}
}

// Nothing but Rotate's one answer holds a secret: not Info, not Rotate's
// answer marshalled as it is, not the stored row in clear.
func TestNoSecretOutsideTheOneAnswer(t *testing.T) {
	t.Parallel()
	s, st, _ := newSecrets(t, 0)
	ctx := t.Context()
	old, _ := s.Signing(ctx, "org-a")
	r, err := s.Rotate(ctx, admin("org-a"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx, admin("org-a"))
	shown, _ := json.Marshal(r)
	infoJSON, _ := json.Marshal(info)
	w, _ := st.GetWebhookSecret(ctx, "org-a")
	row, _ := json.Marshal(w)
	for _, text := range []string{string(shown), string(infoJSON), string(row), string(w.Current), string(w.Previous)} {
		for _, sec := range []string{r.Secret.Reveal(), string(old[0])} {
			if strings.Contains(text, sec) || strings.Contains(text, strings.TrimPrefix(sec, signing.Prefix)) {
				t.Errorf("%q holds a secret", text)
			}
		}
	}
}

// Rewrap moves every organization's secrets under the ring's current
// key, so the old key can leave the ring and signing still works.
func TestRewrapAfterKeyRotation(t *testing.T) {
	t.Parallel()
	st := sqlitetest.New(t)
	oldLine, newLine := "k1 "+keyLine(), "k2 "+keyLine()
	before, _ := signing.New(signing.Config{Store: st, Keys: keyring(t, oldLine)})
	ctx := t.Context()
	want := map[string][][]byte{}
	for _, org := range []string{"org-a", "org-b"} {
		if _, err := before.Rotate(ctx, admin(org)); err != nil {
			t.Fatal(err)
		}
		r, err := before.Rotate(ctx, admin(org))
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := before.Signing(ctx, org)
		if string(keys[0]) != r.Secret.Reveal() || len(keys) != 2 {
			t.Fatal("Signing before the rewrap")
		}
		want[org] = keys
	}
	both := keyring(t, newLine+"\n"+oldLine)
	rep, err := signing.Rewrap(ctx, st, both, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || rep.Rewrapped != 2 || rep.Failed != 0 {
		t.Fatalf("Rewrap = %+v, %v", rep, err)
	}
	if rep, err := signing.Rewrap(ctx, st, both, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil || rep.Current != 2 {
		t.Fatalf("second Rewrap = %+v, %v; want both current", rep, err)
	}
	after, _ := signing.New(signing.Config{Store: st, Keys: keyring(t, newLine)})
	for org, keys := range want {
		got, err := after.Signing(ctx, org)
		if err != nil || len(got) != 2 || !bytes.Equal(got[0], keys[0]) || !bytes.Equal(got[1], keys[1]) {
			t.Errorf("%s after the rewrap, under the new key alone: %d keys, %v", org, len(got), err)
		}
	}
}

func TestHeadersNeedADelivery(t *testing.T) {
	t.Parallel()
	s, _, c := newSecrets(t, 0)
	if _, err := s.Headers(t.Context(), "org-a", "", []byte("{}"), c.now()); !errors.Is(err, toolplane.ErrInvalid) {
		t.Fatalf("Headers without a delivery = %v", err)
	}
	if _, err := s.Signing(t.Context(), ""); !errors.Is(err, toolplane.ErrInvalid) {
		t.Fatalf("Signing without an organization = %v", err)
	}
}
