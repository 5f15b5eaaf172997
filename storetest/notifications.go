package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// NotificationStore is what RunNotifications needs of a backend: a store
// and its notification tables.
type NotificationStore interface {
	toolplane.Store
	toolplane.NotificationStore
}

// The notifications contract, beyond toolplane.NotificationStore's
// comments:
//
//   - Channels, deliveries and used nonces are scoped to an organization:
//     another organization's ID, name or nonce is another row, and no read,
//     delete or nonce use reaches across.
//   - A channel's Secret is kept byte for byte; its Config as JSON keeps
//     it.
//   - The sweeps' reads cross organizations. The suite's own rows for them
//     are made in 2091, so a sweep never reaches another subtest's rows
//     beyond what it filters out by organization.
var notificationCases = []struct {
	name string
	run  func(t *testing.T, s NotificationStore)
}{
	{"ChannelRoundTrip", testChannelRoundTrip},
	{"ChannelUniqueName", testChannelUniqueName},
	{"Deliveries", testDeliveries},
	{"LinkNonceOnce", testLinkNonceOnce},
	{"Sweeps", testNotificationSweeps},
	{"Isolation", testNotificationIsolation},
	{"RewrapWalk", testChannelRewrapWalk},
}

// RunNotifications runs the notification storage checks as subtests of t,
// named Notifications/Check, each on a store newStore answers.
func RunNotifications(t *testing.T, newStore func(t *testing.T) NotificationStore) {
	t.Helper()
	t.Run("Notifications", func(t *testing.T) {
		t.Parallel()
		for _, c := range notificationCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newStore(t))
			})
		}
	})
}

func fullChannel(org, id, name string) *toolplane.NotificationChannel {
	return &toolplane.NotificationChannel{
		ID: id, OrganizationID: org, Name: name, Group: "finance", Kind: toolplane.ChannelEmail,
		Config: toolplane.ChannelConfig{Host: "smtp.example", Port: 587, From: "toolplane@example.com",
			To: []string{"a@example.com", "b@example.com"}, Username: "relay", CAPEM: "-----BEGIN CERTIFICATE-----"},
		Secret: []byte{0, 1, 0xff, 'x'}, Secondary: "nch-2", CreatedBy: "ada@example.com", CreatedAt: at(time.Minute),
	}
}

func testChannelRoundTrip(t *testing.T, s NotificationStore) {
	ctx, org := t.Context(), newOrg()
	want := fullChannel(org, "nch-1", "finance mail")
	if err := s.InsertNotificationChannel(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetNotificationChannel(ctx, org, "nch-1")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetNotificationChannel: %s", d)
	}
	second := fullChannel(org, "nch-0", "a hook")
	second.Kind, second.Config, second.Secret, second.Secondary, second.Group = toolplane.ChannelWebhook, toolplane.ChannelConfig{URL: "https://hooks.example/x"}, nil, "", ""
	if err := s.InsertNotificationChannel(ctx, second); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListNotificationChannels(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "a hook" || list[1].Name != "finance mail" {
		t.Fatalf("ListNotificationChannels = %v, want a hook, finance mail", list)
	}
	if ok, err := s.DeleteNotificationChannel(ctx, org, "nch-1"); !ok || err != nil {
		t.Fatalf("DeleteNotificationChannel = %v, %v", ok, err)
	}
	if ok, err := s.DeleteNotificationChannel(ctx, org, "nch-1"); ok || err != nil {
		t.Fatalf("second DeleteNotificationChannel = %v, %v, want false", ok, err)
	}
	if _, err := s.GetNotificationChannel(ctx, org, "nch-1"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetNotificationChannel after delete = %v, want ErrNotFound", err)
	}
}

func testChannelUniqueName(t *testing.T, s NotificationStore) {
	ctx, org := t.Context(), newOrg()
	if err := s.InsertNotificationChannel(ctx, fullChannel(org, "nch-1", "ops")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*toolplane.NotificationChannel{fullChannel(org, "nch-1", "other"), fullChannel(org, "nch-2", "ops")} {
		if err := s.InsertNotificationChannel(ctx, c); !errors.Is(err, toolplane.ErrExists) {
			t.Errorf("InsertNotificationChannel(%s, %s) = %v, want ErrExists", c.ID, c.Name, err)
		}
	}
}

func testDeliveries(t *testing.T, s NotificationStore) {
	ctx, org := t.Context(), newOrg()
	d := &toolplane.NotificationDelivery{OrganizationID: org, Event: "approval_filed", Subject: "apr-1", ChannelID: "nch-1",
		State: toolplane.DeliveryDead, Attempts: 5, Error: "timeout", UpdatedAt: at(time.Hour)}
	if err := s.RecordDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	newer := *d
	newer.Subject, newer.UpdatedAt = "apr-2", at(2*time.Hour)
	if err := s.RecordDelivery(ctx, &newer); err != nil {
		t.Fatal(err)
	}
	dead, err := s.ListDeliveries(ctx, org, toolplane.DeliveryDead, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].Subject != "apr-2" || dead[1].Subject != "apr-1" {
		t.Fatalf("ListDeliveries(dead) = %v, want apr-2 then apr-1", dead)
	}
	if diff := diff(dead[1], *d); diff != "" {
		t.Errorf("dead delivery: %s", diff)
	}
	// Delivered later (the secondary, or a retry by hand): the row moves.
	d.State, d.Attempts, d.Error, d.UpdatedAt = toolplane.DeliveryDelivered, 6, "", at(3*time.Hour)
	if err := s.RecordDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetDelivery(ctx, org, "approval_filed", "apr-1", "nch-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := diff(*got, *d); diff != "" {
		t.Errorf("GetDelivery: %s", diff)
	}
	if dead, _ := s.ListDeliveries(ctx, org, toolplane.DeliveryDead, 10); len(dead) != 1 {
		t.Errorf("dead after redelivery = %d, want 1", len(dead))
	}
	if _, err := s.GetDelivery(ctx, org, "approval_decided", "apr-1", "nch-1"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetDelivery of another event = %v, want ErrNotFound", err)
	}
	if _, err := s.ListDeliveries(ctx, org, toolplane.DeliveryDead, 0); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("ListDeliveries(limit 0) = %v, want ErrInvalid", err)
	}
}

func testLinkNonceOnce(t *testing.T, s NotificationStore) {
	ctx, org := t.Context(), newOrg()
	exp := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.UseLinkNonce(ctx, org, "n-1", exp); err != nil {
		t.Fatal(err)
	}
	if err := s.UseLinkNonce(ctx, org, "n-1", exp); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second UseLinkNonce = %v, want ErrExists", err)
	}
	n, err := s.DeleteExpiredLinkNonces(ctx, exp.Add(time.Second), 1000)
	if err != nil || n < 1 {
		t.Fatalf("DeleteExpiredLinkNonces = %d, %v, want at least 1", n, err)
	}
	// Removed once its link expired; the link itself refuses by then.
	if err := s.UseLinkNonce(ctx, org, "n-1", exp); err != nil {
		t.Fatalf("UseLinkNonce after expiry sweep = %v", err)
	}
}

func testNotificationSweeps(t *testing.T, s NotificationStore) {
	ctx, org := t.Context(), newOrg()
	since := time.Date(2091, 1, 1, 0, 0, 0, 0, time.UTC)
	old := fullApproval(org, "apr-old", "run", "k-old", since.Add(-time.Hour))
	old.ResolvedAt = since.Add(-time.Minute)
	decided := fullApproval(org, "apr-decided", "run", "k-decided", since.Add(-time.Hour))
	decided.Status, decided.ResolvedAt = toolplane.ApprovalApproved, since.Add(time.Minute)
	filed := fullApproval(org, "apr-new", "run", "k-new", since.Add(time.Second))
	filed.ResolvedAt = time.Time{}
	for _, a := range []*toolplane.Approval{old, decided, filed} {
		insertApproval(t, s, a)
	}
	as, err := s.ApprovalsSince(ctx, since, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range as {
		if a.OrganizationID == org {
			ids = append(ids, a.ID)
		}
	}
	if !slices.Equal(ids, []string{"apr-new", "apr-decided"}) {
		t.Errorf("ApprovalsSince = %v, want apr-new (filed at +1s), apr-decided (resolved at +1m)", ids)
	}
	c := fullClaim(org, "payments.refund", "k-1", since.Add(-time.Hour))
	c.Status, c.UpdatedAt = toolplane.ClaimUncertain, since.Add(time.Minute)
	insertClaim(t, s, c)
	done := fullClaim(org, "payments.refund", "k-2", since.Add(-time.Hour))
	done.Status, done.UpdatedAt = toolplane.ClaimCompleted, since.Add(time.Minute)
	insertClaim(t, s, done)
	cs, err := s.UncertainClaimsSince(ctx, since, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range cs {
		if c.OrganizationID == org {
			keys = append(keys, c.Key)
		}
	}
	if !slices.Equal(keys, []string{"k-1"}) {
		t.Errorf("UncertainClaimsSince = %v, want k-1", keys)
	}
}

func testNotificationIsolation(t *testing.T, s NotificationStore) {
	ctx, a, b := t.Context(), newOrg(), newOrg()
	if err := s.InsertNotificationChannel(ctx, fullChannel(a, "nch-1", "ops")); err != nil {
		t.Fatal(err)
	}
	// The same ID and name in another organization is another row.
	if err := s.InsertNotificationChannel(ctx, fullChannel(b, "nch-1", "ops")); err != nil {
		t.Fatalf("same channel in another organization: %v", err)
	}
	if ok, err := s.DeleteNotificationChannel(ctx, b, "nch-1"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := s.GetNotificationChannel(ctx, a, "nch-1"); err != nil {
		t.Fatalf("deleting b's channel reached a's: %v", err)
	}
	if _, err := s.GetNotificationChannel(ctx, b, "nch-1"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("b reads %v, want ErrNotFound", err)
	}
	if list, _ := s.ListNotificationChannels(ctx, b); len(list) != 0 {
		t.Fatalf("b lists %v", list)
	}
	d := &toolplane.NotificationDelivery{OrganizationID: a, Event: "approval_filed", Subject: "apr-1", ChannelID: "nch-1",
		State: toolplane.DeliveryDead, Attempts: 3, UpdatedAt: at(0)}
	if err := s.RecordDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	if dead, _ := s.ListDeliveries(ctx, b, toolplane.DeliveryDead, 10); len(dead) != 0 {
		t.Fatalf("b's dead letters show a's: %v", dead)
	}
	if _, err := s.GetDelivery(ctx, b, "approval_filed", "apr-1", "nch-1"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("b reads a's delivery: %v", err)
	}
	exp := at(time.Hour)
	if err := s.UseLinkNonce(ctx, a, "n-1", exp); err != nil {
		t.Fatal(err)
	}
	if err := s.UseLinkNonce(ctx, b, "n-1", exp); err != nil {
		t.Fatalf("a nonce used in a is used in b: %v", err)
	}
}

func testChannelRewrapWalk(t *testing.T, s NotificationStore) {
	ctx, a, b := t.Context(), newOrg(), newOrg()
	for _, org := range []string{a, b} {
		for _, id := range []string{"nch-2", "nch-1", "nch-3"} {
			if err := s.InsertNotificationChannel(ctx, fullChannel(org, id, "c "+id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Paged two at a time across organizations, every channel of a and b
	// is met once, in organization then ID order.
	var seen []string
	org, id := "", ""
	for {
		cs, err := s.ChannelsAfter(ctx, org, id, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.OrganizationID == a || c.OrganizationID == b {
				seen = append(seen, c.OrganizationID+"/"+c.ID)
			}
		}
		if len(cs) < 2 {
			break
		}
		org, id = cs[len(cs)-1].OrganizationID, cs[len(cs)-1].ID
	}
	first, second := min(a, b), max(a, b)
	want := []string{first + "/nch-1", first + "/nch-2", first + "/nch-3", second + "/nch-1", second + "/nch-2", second + "/nch-3"}
	if !slices.Equal(seen, want) {
		t.Errorf("walk = %v, want %v", seen, want)
	}
	prev := fullChannel(a, "nch-1", "").Secret
	if ok, err := s.ReplaceChannelSecret(ctx, a, "nch-1", []byte("not what it holds"), []byte("x")); ok || err != nil {
		t.Errorf("replace from a stale secret = %v, %v, want false", ok, err)
	}
	if ok, err := s.ReplaceChannelSecret(ctx, b, "nch-9", prev, []byte("x")); ok || err != nil {
		t.Errorf("replace of a missing channel = %v, %v, want false", ok, err)
	}
	if ok, err := s.ReplaceChannelSecret(ctx, a, "nch-1", prev, []byte("rewrapped")); !ok || err != nil {
		t.Fatalf("replace = %v, %v", ok, err)
	}
	got, _ := s.GetNotificationChannel(ctx, a, "nch-1")
	other, _ := s.GetNotificationChannel(ctx, b, "nch-1")
	if string(got.Secret) != "rewrapped" || string(other.Secret) != string(prev) {
		t.Errorf("after replace: a holds %q, b %q", got.Secret, other.Secret)
	}
}
