package notify_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
)

// names is a DNS server an attacker controls: each name answers the
// addresses it is set to now, and may be set to others later.
type names struct {
	mu sync.Mutex
	m  map[string][]netip.Addr
}

func newNames(m map[string]string) *names {
	n := &names{m: map[string][]netip.Addr{}}
	for name, addr := range m {
		n.set(name, addr)
	}
	return n
}

func (n *names) set(name string, addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m[name] = nil
	for _, a := range addrs {
		n.m[name] = append(n.m[name], netip.MustParseAddr(a))
	}
}

func (n *names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	as, ok := n.m[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return as, nil
}

// TestChannelsToRefusedAddressesAreRefusedAtCreation: a webhook, Slack or
// SMTP destination that is, in any spelling, or resolves to, an address
// egress refuses is refused as an invalid channel naming its field, and
// nothing is stored; a public destination, or one the operator's ranges
// admit, is accepted.
func TestChannelsToRefusedAddressesAreRefusedAtCreation(t *testing.T) {
	t.Parallel()
	dns := newNames(map[string]string{
		"hooks.example.com":   "93.184.215.14",
		"internal.example":    "10.1.2.3",
		"metadata.example":    "169.254.169.254",
		"split.example":       "93.184.215.14",
		"smtp.example.com":    "93.184.215.15",
		"loopback.example":    "127.0.0.1",
		"localhost":           "127.0.0.1",
		"mapped.example":      "::ffff:127.0.0.1",
		"relay.corp.internal": "10.20.0.7",
	})
	dns.set("split.example", "93.184.215.14", "192.168.1.10")
	st := newStoreOnly(t)
	s, err := notify.New(notify.Config{Store: st, Keys: keyring(t), Resolver: dns})
	if err != nil {
		t.Fatal(err)
	}
	const slackPath = "/services/T0/B0/slack-secret-path"
	hook := func(url string) notify.NewChannel {
		return notify.NewChannel{Name: "hook " + url, Kind: toolplane.ChannelWebhook, Config: toolplane.ChannelConfig{URL: url},
			Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}
	}
	slack := func(host string) notify.NewChannel {
		return notify.NewChannel{Name: "slack " + host, Kind: toolplane.ChannelSlack,
			Secrets: toolplane.ChannelSecrets{SlackURL: toolplane.SecretString("https://" + host + slackPath)}}
	}
	mail := func(host string) notify.NewChannel {
		return notify.NewChannel{Name: "mail " + host, Kind: toolplane.ChannelEmail,
			Config: toolplane.ChannelConfig{Host: host, Port: 587, From: "tp@example.com", To: []string{"ops@example.com"}}}
	}
	refused := []struct {
		n     notify.NewChannel
		field string
	}{
		{hook("http://127.0.0.1:8080/"), "config.url"},
		{hook("http://localhost:8080/"), "config.url"},
		{hook("http://169.254.169.254/latest/meta-data/"), "config.url"},
		{hook("http://[::ffff:127.0.0.1]/"), "config.url"},
		{hook("http://[::ffff:a9fe:a9fe]/"), "config.url"},
		{hook("http://[::1]:9000/"), "config.url"},
		{hook("http://2130706433/"), "config.url"},
		{hook("http://0x7f.1/"), "config.url"},
		{hook("http://10.0.0.5/"), "config.url"},
		{hook("https://internal.example/hook"), "config.url"},
		{hook("https://metadata.example/"), "config.url"},
		{hook("https://split.example/"), "config.url"},
		{hook("https://loopback.example/"), "config.url"},
		{hook("https://mapped.example/"), "config.url"},
		{slack("192.168.1.1"), "secrets.slack_url"},
		{slack("internal.example"), "secrets.slack_url"},
		{mail("127.0.0.1"), "config.host"},
		{mail("169.254.169.254"), "config.host"},
		{mail("relay.corp.internal"), "config.host"},
	}
	for _, c := range refused {
		_, err := s.Create(t.Context(), c.n, admin)
		switch {
		case err == nil:
			t.Errorf("%s: created", c.n.Name)
			continue
		case !errors.Is(err, notify.ErrChannel) || !errors.Is(err, toolplane.ErrInvalid) || errors.Is(err, toolplane.ErrForbidden):
			t.Errorf("%s: %v, want an invalid channel (not a forbidden caller)", c.n.Name, err)
		case !strings.Contains(err.Error(), c.field+": the destination is not allowed"):
			t.Errorf("%s: %v does not name %s", c.n.Name, err, c.field)
		}
		if strings.Contains(err.Error(), "slack-secret-path") {
			t.Errorf("%s: the refusal quotes the Slack URL's secret: %v", c.n.Name, err)
		}
	}
	if cs, err := s.List(t.Context(), admin); err != nil || len(cs) != 0 {
		t.Fatalf("refused channels stored: %v, %v", cs, err)
	}
	for _, n := range []notify.NewChannel{
		hook("https://hooks.example.com/tp"),
		hook("https://93.184.215.14/tp"),
		// Not known to DNS now: every send resolves and checks it.
		hook("https://not-yet.example.com/tp"),
		slack("hooks.example.com"),
		mail("smtp.example.com"),
	} {
		if _, err := s.Create(t.Context(), n, admin); err != nil {
			t.Errorf("%s: %v", n.Name, err)
		}
	}

	// The operator admits the internal relay's network, and no more: the
	// metadata address stays refused inside a range that holds it.
	open, err := notify.New(notify.Config{Store: newStoreOnly(t), Keys: keyring(t), Resolver: dns,
		AllowCIDRs: []string{"10.0.0.0/8", "169.254.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []notify.NewChannel{mail("relay.corp.internal"), hook("https://internal.example/hook"), hook("http://10.0.0.5/")} {
		if _, err := open.Create(t.Context(), n, admin); err != nil {
			t.Errorf("%s with 10.0.0.0/8 allowed: %v", n.Name, err)
		}
	}
	if _, err := open.Create(t.Context(), hook("http://169.254.169.254/"), admin); err == nil {
		t.Error("the metadata address was admitted by a range holding it")
	}
	if _, err := notify.New(notify.Config{Store: newStoreOnly(t), Keys: keyring(t), AllowCIDRs: []string{"10.0.0.0/33"}}); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("a malformed range: %v, want ErrInvalid", err)
	}
}

// TestEverySendIsCheckedAgain: a channel created while its name resolved
// to a public address, whose name then answers a refused one (DNS
// rebinding), or that was stored before channels were checked, reaches
// nothing; its dead letter says only that egress refused it. A
// destination that is allowed and does not answer is dead-lettered as a
// failed connection, in the same words whether its port is closed, hangs
// or speaks something else.
func TestEverySendIsCheckedAgain(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	dns := newNames(map[string]string{"hooks.example.com": "93.184.215.14"})
	st := newStoreOnly(t)
	s, err := notify.New(notify.Config{Store: st, Keys: keyring(t), Resolver: dns, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hook, err := s.Create(t.Context(), notify.NewChannel{Name: "hook", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: "http://hooks.example.com:" + strconv.Itoa(port) + "/"}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	mail, err := s.Create(t.Context(), notify.NewChannel{Name: "mail", Kind: toolplane.ChannelEmail,
		Config: toolplane.ChannelConfig{Host: "hooks.example.com", Port: port, From: "a@example.com", To: []string{"b@example.com"}}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	dns.set("hooks.example.com", "127.0.0.1")
	// A channel stored by an earlier version, which checked nothing.
	old := &toolplane.NotificationChannel{ID: toolplane.NewID("nch_"), OrganizationID: "org-1", Name: "old", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: srv.URL}, CreatedBy: "root", CreatedAt: time.Now()}
	if err := st.InsertNotificationChannel(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	a := fileApproval(t, st, "")
	for _, ch := range []string{hook.ID, mail.ID, old.ID} {
		d := notify.Delivery{Org: "org-1", Event: notify.ApprovalFiled, Subject: a.ID, Channel: ch}
		err := s.Send(t.Context(), d, 1)
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s: send = %v, want a refusal the operator's log can read", ch, err)
		}
		if _, err := s.Dead(t.Context(), d, 1, err); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetDelivery(t.Context(), "org-1", string(notify.ApprovalFiled), a.ID, ch)
		if err != nil || got.State != toolplane.DeliveryDead || got.Error != "destination not allowed by egress" {
			t.Errorf("%s: dead letter %+v, %v", ch, got, err)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the refused destination received %d requests", hits.Load())
	}

	// Allowed destinations that do not answer as a receiver would.
	allowed, err := notify.New(notify.Config{Store: st, Keys: keyring(t), Timeout: 300 * time.Millisecond, AllowCIDRs: testReceivers})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	hanging, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hanging.Close()
	go func() {
		for {
			c, err := hanging.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	babbling, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer babbling.Close()
	go func() {
		for {
			c, err := babbling.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			c.Close()
		}
	}()
	for i, p := range []int{closedPort, hanging.Addr().(*net.TCPAddr).Port, babbling.Addr().(*net.TCPAddr).Port} {
		addr := "127.0.0.1:" + strconv.Itoa(p)
		for _, n := range []notify.NewChannel{
			{Name: "hook " + addr, Kind: toolplane.ChannelWebhook, Config: toolplane.ChannelConfig{URL: "https://" + addr + "/"},
				Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}},
			{Name: "mail " + addr, Kind: toolplane.ChannelEmail,
				Config: toolplane.ChannelConfig{Host: "127.0.0.1", Port: p, From: "a@example.com", To: []string{"b@example.com"}}},
		} {
			ch, err := allowed.Create(t.Context(), n, admin)
			if err != nil {
				t.Fatal(err)
			}
			d := notify.Delivery{Org: "org-1", Event: notify.ApprovalFiled, Subject: a.ID, Channel: ch.ID}
			err = allowed.Send(t.Context(), d, 1)
			if err == nil {
				t.Fatalf("%s (%d): delivered", n.Name, i)
			}
			if _, err := allowed.Dead(t.Context(), d, 1, err); err != nil {
				t.Fatal(err)
			}
			got, err := st.GetDelivery(t.Context(), "org-1", string(notify.ApprovalFiled), a.ID, ch.ID)
			if err != nil || got.Error != "connection failed" {
				t.Errorf("%s (%d): dead letter %+v, %v; want only \"connection failed\"", n.Name, i, got, err)
			}
		}
	}
}
