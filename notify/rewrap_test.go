package notify_test

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/secret"
)

func TestRewrapChannelsUnderANewKey(t *testing.T) {
	t.Parallel()
	st := newStoreOnly(t)
	key := func() string {
		b := make([]byte, secret.KeySize)
		rand.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	a, b := "a "+key(), "b "+key()
	ring := func(text string) *secret.Keyring {
		k, err := secret.ParseKeyring(text)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	service := func(k *secret.Keyring) *notify.Service {
		s, err := notify.New(notify.Config{Store: st, Keys: k, AllowCIDRs: testReceivers})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old := service(ring(a))
	if _, err := old.Create(t.Context(), notify.NewChannel{Name: "hook", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: "https://hooks.example/x"}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}, admin); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Create(t.Context(), notify.NewChannel{Name: "relay", Kind: toolplane.ChannelEmail,
		Config: toolplane.ChannelConfig{Host: "127.0.0.1", Port: 25, From: "a@example.com", To: []string{"b@example.com"}, Insecure: true}}, admin); err != nil {
		t.Fatal(err)
	}
	// Only the new key: the channel's secret does not open yet.
	if _, err := service(ring(b)).List(t.Context(), admin); !errors.Is(err, secret.ErrUnknownKey) {
		t.Fatalf("list under the new key alone before the rewrap: %v", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := notify.RewrapChannels(t.Context(), st, ring(b+"\n"+a), quiet)
	// Both are sealed, the relay's holding no secret value: both move.
	if err != nil || r.Rewrapped != 2 || r.Failed != 0 {
		t.Fatalf("rewrap = %+v, %v", r, err)
	}
	list, err := service(ring(b)).List(t.Context(), admin)
	if err != nil || len(list) != 2 {
		t.Fatalf("list under the new key alone after the rewrap: %v, %v", list, err)
	}
	again, err := notify.RewrapChannels(t.Context(), st, ring(b+"\n"+a), quiet)
	if err != nil || again.Rewrapped != 0 || again.Current != r.Rewrapped {
		t.Fatalf("second rewrap = %+v, %v; want nothing left to do", again, err)
	}
	// A ring missing the key a secret is under reports it incomplete.
	if _, err := notify.RewrapChannels(t.Context(), st, ring("c "+key()), quiet); !errors.Is(err, secret.ErrIncomplete) {
		t.Fatalf("rewrap without the key: %v, want ErrIncomplete", err)
	}
}
