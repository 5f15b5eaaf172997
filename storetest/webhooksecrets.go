package storetest

import (
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// WebhookSecretStore is what RunWebhookSecrets needs of a backend: a
// store and its callback signing secrets.
type WebhookSecretStore interface {
	toolplane.Store
	toolplane.WebhookSecretStore
}

// The callback signing secrets contract, beyond
// toolplane.WebhookSecretStore's comments:
//
//   - One row per organization; no read or update reaches another's.
//   - Sealed secrets are kept byte for byte; a zero PreviousUntil and an
//     empty Previous are "no previous secret" and answer as such.
//   - Concurrent updates from one Version: exactly one succeeds.
var webhookSecretCases = []struct {
	name string
	run  func(t *testing.T, s WebhookSecretStore)
}{
	{"RoundTrip", testWebhookSecretRoundTrip},
	{"OnePerOrganization", testWebhookSecretOnePerOrganization},
	{"ConcurrentRotation", testWebhookSecretConcurrentRotation},
	{"Isolation", testWebhookSecretIsolation},
	{"Walk", testWebhookSecretWalk},
}

// RunWebhookSecrets runs the callback signing secret checks as subtests
// of t, named WebhookSecrets/Check, each on a store newStore answers.
func RunWebhookSecrets(t *testing.T, newStore func(t *testing.T) WebhookSecretStore) {
	t.Helper()
	t.Run("WebhookSecrets", func(t *testing.T) {
		t.Parallel()
		for _, c := range webhookSecretCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newStore(t))
			})
		}
	})
}

func newWebhookSecret(org string) *toolplane.WebhookSecret {
	return &toolplane.WebhookSecret{OrganizationID: org, CurrentID: "whs-1", Current: []byte{1, 0, 0xff, 'c'},
		CreatedAt: at(time.Minute), Version: 1}
}

func testWebhookSecretRoundTrip(t *testing.T, s WebhookSecretStore) {
	ctx, org := t.Context(), newOrg()
	if _, err := s.GetWebhookSecret(ctx, org); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetWebhookSecret before insert = %v, want ErrNotFound", err)
	}
	want := newWebhookSecret(org)
	if err := s.InsertWebhookSecret(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetWebhookSecret(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetWebhookSecret: %s", d)
	}
	// A rotation: the current secret becomes the previous, until a time.
	rotated := *got
	rotated.PreviousID, rotated.Previous, rotated.PreviousUntil = got.CurrentID, got.Current, at(25*time.Hour)
	rotated.CurrentID, rotated.Current, rotated.CreatedAt, rotated.RotatedBy = "whs-2", []byte{1, 2, 3}, at(time.Hour), "ada@example.com"
	if ok, err := s.UpdateWebhookSecret(ctx, &rotated); !ok || err != nil {
		t.Fatalf("UpdateWebhookSecret = %v, %v", ok, err)
	}
	if rotated.Version != 2 {
		t.Errorf("Version after update = %d, want 2", rotated.Version)
	}
	got, err = s.GetWebhookSecret(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(*got, rotated); d != "" {
		t.Errorf("after rotation: %s", d)
	}
	// The previous secret dropped: back to none.
	dropped := *got
	dropped.PreviousID, dropped.Previous, dropped.PreviousUntil = "", nil, time.Time{}
	if ok, err := s.UpdateWebhookSecret(ctx, &dropped); !ok || err != nil {
		t.Fatalf("UpdateWebhookSecret = %v, %v", ok, err)
	}
	got, err = s.GetWebhookSecret(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Previous) != 0 || got.PreviousID != "" || !got.PreviousUntil.IsZero() || got.Version != 3 {
		t.Errorf("after dropping the previous secret: %+v", got)
	}
	// A stale version changes nothing.
	stale := *got
	stale.Version, stale.CurrentID = 1, "whs-stale"
	if ok, err := s.UpdateWebhookSecret(ctx, &stale); ok || err != nil {
		t.Fatalf("stale UpdateWebhookSecret = %v, %v, want false", ok, err)
	}
	if stale.Version != 1 {
		t.Errorf("a stale update moved the argument's Version to %d", stale.Version)
	}
	if got, _ := s.GetWebhookSecret(ctx, org); got.CurrentID != "whs-2" {
		t.Errorf("a stale update stored %q", got.CurrentID)
	}
}

func testWebhookSecretOnePerOrganization(t *testing.T, s WebhookSecretStore) {
	ctx, org := t.Context(), newOrg()
	if err := s.InsertWebhookSecret(ctx, newWebhookSecret(org)); err != nil {
		t.Fatal(err)
	}
	second := newWebhookSecret(org)
	second.CurrentID = "whs-other"
	if err := s.InsertWebhookSecret(ctx, second); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second InsertWebhookSecret = %v, want ErrExists", err)
	}
}

func testWebhookSecretConcurrentRotation(t *testing.T, s WebhookSecretStore) {
	ctx, org := t.Context(), newOrg()
	if err := s.InsertWebhookSecret(ctx, newWebhookSecret(org)); err != nil {
		t.Fatal(err)
	}
	var won atomic.Int64
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			w := newWebhookSecret(org)
			w.CurrentID = "whs-" + string(rune('a'+i%26))
			ok, err := s.UpdateWebhookSecret(ctx, w)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d concurrent updates from one version succeeded, want 1", won.Load())
	}
	if got, _ := s.GetWebhookSecret(ctx, org); got.Version != 2 {
		t.Fatalf("Version = %d, want 2", got.Version)
	}
}

func testWebhookSecretIsolation(t *testing.T, s WebhookSecretStore) {
	ctx, a, b := t.Context(), newOrg(), newOrg()
	if err := s.InsertWebhookSecret(ctx, newWebhookSecret(a)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWebhookSecret(ctx, b); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("another organization's GetWebhookSecret = %v, want ErrNotFound", err)
	}
	other := newWebhookSecret(b)
	other.CurrentID = "whs-b"
	if ok, err := s.UpdateWebhookSecret(ctx, other); ok || err != nil {
		t.Fatalf("another organization's UpdateWebhookSecret = %v, %v, want false", ok, err)
	}
	// b's own secret (the same IDs, the same version) is a row of its own.
	if err := s.InsertWebhookSecret(ctx, newWebhookSecret(b)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.UpdateWebhookSecret(ctx, other); !ok || err != nil {
		t.Fatalf("UpdateWebhookSecret of b = %v, %v", ok, err)
	}
	if got, _ := s.GetWebhookSecret(ctx, a); got.CurrentID != "whs-1" || got.Version != 1 {
		t.Fatalf("b's update reached a: %+v", got)
	}
}

func testWebhookSecretWalk(t *testing.T, s WebhookSecretStore) {
	ctx := t.Context()
	// Organizations of this subtest's own prefix: nothing else sorts
	// between the prefix and its rows.
	prefix := "whs-walk-" + rand.Text()
	for _, o := range []string{prefix + "-a", prefix + "-b", prefix + "-c"} {
		if err := s.InsertWebhookSecret(ctx, newWebhookSecret(o)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.WebhookSecretsAfter(ctx, prefix, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].OrganizationID != prefix+"-a" || page[1].OrganizationID != prefix+"-b" {
		t.Fatalf("first page = %v", page)
	}
	page, err = s.WebhookSecretsAfter(ctx, page[1].OrganizationID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1 || page[0].OrganizationID != prefix+"-c" || diff(page[0], *newWebhookSecret(prefix + "-c")) != "" {
		t.Fatalf("second page = %v", page)
	}
	for _, limit := range []int{0, maxLimit + 1} {
		if _, err := s.WebhookSecretsAfter(ctx, prefix, limit); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("WebhookSecretsAfter limit %d = %v, want ErrInvalid", limit, err)
		}
	}
}
