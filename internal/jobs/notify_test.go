package jobs_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/backend"
	"github.com/toolplane/toolplane/internal/jobs"
	"github.com/toolplane/toolplane/internal/race"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/webhook"
)

const webhookKey = "whsec-jobs-0123456789abcdef0123456789"

var platformAdmin = &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "root",
	Roles: []string{toolplane.RolePlatformAdmin}}

// notifyNode is a node whose runner delivers notifications.
type notifyNode struct {
	*node
	notes *notify.Service
}

func startNotifyNode(t *testing.T, database string, keys *secret.Keyring, tune ...func(*jobs.Options)) *notifyNode {
	t.Helper()
	return startNotifyNodeWith(t, database, keys, sendDef(), nil, 0, tune...)
}

// startNotifyNodeWith is startNotifyNode serving def, whose handler fails
// with fail when it is set; the binding calls that failure uncertain.
func startNotifyNodeWith(t *testing.T, database string, keys *secret.Keyring, def toolplane.Definition, fail error, lead time.Duration, tune ...func(*jobs.Options)) *notifyNode {
	t.Helper()
	ctx := context.Background()
	b, err := backend.Open(ctx, database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	store := b.Store
	hs := handler.NewRegistry()
	hb, _ := handler.BindFunc("email.send", func(context.Context, handler.Call, any) (any, error) {
		if fail != nil {
			return nil, fail
		}
		return map[string]any{"message_id": "m-1"}, nil
	}, func(err error) handler.Ending {
		return handler.Uncertain("the mail server stopped answering after DATA")
	})
	_ = hs.Register(hb)
	reg, _, err := registry.Build([]toolplane.Definition{def}, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	notes, err := notify.New(notify.Config{Store: store, Keys: keys, PublicURL: "https://toolplane.example", Timeout: 5 * time.Second, ExpiryLead: lead,
		// The test receivers listen on loopback: the operator's switch
		// admits them.
		AllowCIDRs: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	// A short fetch poll: on SQLite a retry (backed off, so scheduled)
	// is found by the poll, 10 s by default (jobs.DefaultPollWithoutListener);
	// these tests are about what is delivered, not when.
	opt := jobs.Options{SweepEvery: time.Hour, Logger: quiet, NotifyBackoff: 10 * time.Millisecond, Poll: 100 * time.Millisecond}
	for _, f := range tune {
		f(&opt)
	}
	r, err := b.Runner(jobs.Deps{Invoker: iv, Approvals: approvals, Store: store, Maint: store, Notifier: notes}, opt)
	if err != nil {
		t.Fatal(err)
	}
	iv.UseScheduler(r)
	iv.UseNotice(r)
	return &notifyNode{node: &node{iv: iv, runner: r, store: store}, notes: notes}
}

func testKeys(t testing.TB) *secret.Keyring {
	t.Helper()
	b := make([]byte, secret.KeySize)
	rand.Read(b)
	k, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// hookReceiver is a webhook endpoint that verifies every request and
// keeps the payloads it accepted, with when it received each.
type hookReceiver struct {
	mu      sync.Mutex
	got     []notify.Payload
	at      map[string]time.Time // approval id -> first receipt
	refused atomic.Int64
	seen    chan string
}

func newHookReceiver(t *testing.T) (*hookReceiver, string) {
	r := &hookReceiver{at: map[string]time.Time{}, seen: make(chan string, 10000)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	if webhook.Check([][]byte{[]byte(webhookKey)}, req.Header.Get(webhook.HeaderTimestamp), req.Header.Get(webhook.HeaderSignature), body, now, 5*time.Minute) != nil {
		r.refused.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var p notify.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, p)
	if p.Approval != nil && p.Event == notify.ApprovalFiled {
		if _, ok := r.at[p.Approval.ID]; !ok {
			r.at[p.Approval.ID] = now
		}
	}
	r.mu.Unlock()
	r.seen <- string(p.Event)
}

func (r *hookReceiver) events(subject string) []notify.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notify.Event
	for _, p := range r.got {
		if p.Approval != nil && p.Approval.ID == subject {
			out = append(out, p.Event)
		}
	}
	return out
}

func addHook(t *testing.T, n *notifyNode, name, url, secondary string) string {
	t.Helper()
	return addGroupHook(t, n, name, "", url, secondary)
}

func addGroupHook(t *testing.T, n *notifyNode, name, group, url, secondary string) string {
	t.Helper()
	c, err := n.notes.Create(context.Background(), notify.NewChannel{Name: name, Group: group, Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: url}, Secrets: toolplane.ChannelSecrets{HMACKey: webhookKey}, Secondary: secondary}, platformAdmin)
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func TestApprovalFiledAndDecidedAreNotified(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			n := startNotifyNode(t, path, testKeys(t))
			rcv, url := newHookReceiver(t)
			addHook(t, n, "hook", url, "")
			n.start(t)
			_, err := n.iv.Invoke(context.Background(), "email.send", map[string]any{"to": "jo@acme.test"}, callInv())
			var ar *invoke.ApprovalRequired
			if !errors.As(err, &ar) {
				t.Fatalf("err = %v", err)
			}
			eventually(t, "the filing to be told", func() bool { return slices.Contains(rcv.events(ar.ID), notify.ApprovalFiled) })
			if _, err := n.iv.Resolve(context.Background(), ar.ID, approval.Decision{Approve: false, Reason: "no"},
				&toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the decision to be told", func() bool { return slices.Contains(rcv.events(ar.ID), notify.ApprovalDecided) })
			if got := rcv.events(ar.ID); len(got) != 2 || rcv.refused.Load() != 0 {
				t.Errorf("events %v, refused %d; want each told once", got, rcv.refused.Load())
			}
		})
	}
}

// TestHangingEndpointIsDeadLetteredAndTheSecondaryUsed: a primary channel
// that accepts and never answers is tried NotifyAttempts times, each
// bounded, then listed as dead, and the secondary is told.
func TestHangingEndpointIsDeadLetteredAndTheSecondaryUsed(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			n := startNotifyNode(t, path, testKeys(t), func(o *jobs.Options) {
				o.NotifyAttempts, o.NotifyTimeout = 3, 300*time.Millisecond
			})
			var attempts atomic.Int64
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					attempts.Add(1)
					t.Cleanup(func() { c.Close() }) // never answered
				}
			}()
			rcv, url := newHookReceiver(t)
			// The backup serves another group, so only the fallback
			// reaches it.
			backup := addGroupHook(t, n, "backup", "standby", url, "")
			primary := addHook(t, n, "primary", "http://"+ln.Addr().String()+"/", backup)
			n.start(t)
			start := time.Now()
			_, err = n.iv.Invoke(context.Background(), "email.send", map[string]any{"to": "jo@acme.test"}, callInv())
			var ar *invoke.ApprovalRequired
			if !errors.As(err, &ar) {
				t.Fatalf("err = %v", err)
			}
			eventually(t, "the primary to be dead-lettered", func() bool {
				d, err := n.store.GetDelivery(context.Background(), "org-1", string(notify.ApprovalFiled), ar.ID, primary)
				return err == nil && d.State == toolplane.DeliveryDead
			})
			if got := attempts.Load(); got != 3 {
				t.Errorf("hanging endpoint tried %d times, want 3", got)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("three bounded attempts took %s", took)
			}
			dead, err := n.notes.DeadLetters(context.Background(), 10, platformAdmin)
			if err != nil || len(dead) != 1 || dead[0].ChannelID != primary || dead[0].Attempts != 3 || dead[0].Error == "" {
				t.Fatalf("dead letters = %+v, %v", dead, err)
			}
			eventually(t, "the secondary to be told", func() bool {
				d, err := n.store.GetDelivery(context.Background(), "org-1", string(notify.ApprovalFiled), ar.ID, backup)
				return err == nil && d.State == toolplane.DeliveryDelivered
			})
			if got := rcv.events(ar.ID); !slices.Equal(got, []notify.Event{notify.ApprovalFiled}) {
				t.Errorf("secondary told %v, want the filing once", got)
			}
			other := &toolplane.Credential{OrganizationID: "org-2", Kind: toolplane.CredentialPerson, Subject: "root", Roles: []string{toolplane.RolePlatformAdmin}}
			if dead, _ := n.notes.DeadLetters(context.Background(), 10, other); len(dead) != 0 {
				t.Errorf("another organization reads the dead letters: %v", dead)
			}
		})
	}
}

// TestSweepTellsWhatACrashLost: an approval committed by a node that died
// before enqueueing its notification is told by the sweep, once however
// often the sweep runs.
func TestSweepTellsWhatACrashLost(t *testing.T) {
	path := sqliteFile(t)
	n := startNotifyNode(t, path, testKeys(t), func(o *jobs.Options) { o.SweepEvery = 100 * time.Millisecond })
	rcv, url := newHookReceiver(t)
	addHook(t, n, "hook", url, "")
	// Filed straight into the store: the hand-off to the runner never
	// happened.
	a := &toolplane.Approval{RunID: "run-lost", Tool: "email.send", Key: "k-lost", ArgumentsHash: "h",
		Arguments: []byte(`{"to":"jo"}`), Invocation: []byte(`{}`), PrincipalID: "agent-1", OrganizationID: "org-1"}
	if _, err := approval.New(approval.Config{Store: n.store}).File(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	// And a claim a lost node left uncertain, its notice never sent.
	now := time.Now()
	lost := &toolplane.Claim{OrganizationID: "org-1", Tool: "email.send", Key: "k-uncertain\x00\xff", RequestHash: "h",
		Status: toolplane.ClaimUncertain, Dispatched: true, Attempts: 1, RunID: "run-lost", Reason: "worker lost",
		Arguments: []byte(`{"to":"jo"}`), Version: 1, CreatedAt: now, UpdatedAt: now}
	if ok, err := n.store.InsertClaim(context.Background(), lost); !ok || err != nil {
		t.Fatal(ok, err)
	}
	uncertain := func() int {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		k := 0
		for _, p := range rcv.got {
			if p.Event == notify.CallUncertain && p.Call != nil && p.Call.RunID == "run-lost" {
				k++
			}
		}
		return k
	}
	n.start(t)
	eventually(t, "the sweep to tell the filing", func() bool { return len(rcv.events(a.ID)) == 1 })
	eventually(t, "the sweep to tell the uncertain call", func() bool { return uncertain() == 1 })
	time.Sleep(500 * time.Millisecond) // several more sweeps
	if got := rcv.events(a.ID); len(got) != 1 || uncertain() != 1 {
		t.Fatalf("told %v and %d uncertain, want each once", got, uncertain())
	}
}

// TestUncertainCallIsNotified: the invoker holding a claim uncertain tells
// the organization's default channel.
func TestUncertainCallIsNotified(t *testing.T) {
	def := sendDef()
	def.Annotations.RequiresApproval = false
	n := startNotifyNodeWith(t, sqliteFile(t), testKeys(t), def, errors.New("connection reset after DATA"), 0)
	var got []notify.Payload
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if webhook.Check([][]byte{[]byte(webhookKey)}, r.Header.Get(webhook.HeaderTimestamp), r.Header.Get(webhook.HeaderSignature), body, time.Now(), time.Minute) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	addHook(t, n, "ops", srv.URL, "")
	n.start(t)
	r, err := n.iv.Invoke(context.Background(), "email.send", map[string]any{"to": "jo@acme.test"}, callInv())
	if err != nil || r.OK || r.Error.Code != toolplane.CodeUncertain {
		t.Fatalf("call = %+v, %v; want uncertain", r, err)
	}
	eventually(t, "the uncertain call to be told", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	})
	p := got[0]
	if p.Event != notify.CallUncertain || p.Call == nil || p.Call.Tool != "email.send" || p.Call.RunID != "run-1" ||
		p.Call.Reason == "" || string(p.Call.Arguments) != `{"to":"jo@acme.test"}` || p.Link != "" {
		t.Errorf("payload = %+v %+v", p, p.Call)
	}
}

// TestEscalationChainIsNotified: each group of an approval chain hears of
// its approval (filed or escalated), is reminded before it expires, and
// hears how it ended.
func TestEscalationChainIsNotified(t *testing.T) {
	ctx := context.Background()
	def := sendDef()
	def.Approval = &toolplane.ApprovalPolicy{Chain: []string{"leads", "directors"}, OnTimeout: toolplane.OnTimeoutEscalate, TTL: toolplane.Duration(time.Hour)}
	// Reminded a second after filing: the hour's wait less the lead.
	n := startNotifyNodeWith(t, sqliteFile(t), testKeys(t), def, nil, time.Hour-time.Second, func(o *jobs.Options) { o.Poll = 50 * time.Millisecond })
	leads, leadsURL := newHookReceiver(t)
	directors, directorsURL := newHookReceiver(t)
	addGroupHook(t, n, "leads", "leads", leadsURL, "")
	addGroupHook(t, n, "directors", "directors", directorsURL, "")
	n.start(t)
	_, err := n.iv.Invoke(ctx, "email.send", map[string]any{"to": "jo"}, callInv())
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatalf("err = %v", err)
	}
	told := func(r *hookReceiver) []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for _, p := range r.got {
			out = append(out, string(p.Event)+":"+p.Approval.Status)
		}
		slices.Sort(out)
		return out
	}
	// expire brings an approval's expiry forward, as an hour passing would.
	expire := func(id string) {
		a, err := n.store.GetApproval(ctx, "org-1", id)
		if err != nil {
			t.Fatal(err)
		}
		a.ExpiresAt = time.Now().Add(-time.Second)
		if ok, err := n.store.UpdateApproval(ctx, a); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if err := n.runner.ApprovalFiled(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"approval_expiring:pending", "approval_filed:pending"}
	eventually(t, "the leads to hear of the filing and the reminder", func() bool { return slices.Equal(told(leads), want) })
	expire(ar.ID)
	want = []string{"approval_escalated:pending", "approval_expiring:pending"}
	eventually(t, "the directors to hear of the escalation and the reminder", func() bool { return slices.Equal(told(directors), want) })
	want = []string{"approval_decided:expired", "approval_expiring:pending", "approval_filed:pending"}
	eventually(t, "the leads to hear their approval went on", func() bool { return slices.Equal(told(leads), want) })
	directors.mu.Lock()
	second := directors.got[0].Approval.ID
	directors.mu.Unlock()
	expire(second)
	want = []string{"approval_decided:expired", "approval_escalated:pending", "approval_expiring:pending"}
	eventually(t, "the directors to hear the end", func() bool { return slices.Equal(told(directors), want) })
}

// TestNotificationLatency files approvals one after another on the
// embedded store and measures filing to receipt at a local webhook: the
// target is one second at p99. NOTIFY_LATENCY_N sets how many (default
// 50); the figures are logged for BENCHMARKS.md.
//
// The target is the product's, for a node that has its CPU, and a build
// without the race detector keeps it with room on a loaded host (p99
// 66-168 ms at load 9 on two cores). Under the race detector every step
// of the path (the filing's commit, River's fetch, the signed delivery)
// runs several times slower, and a loaded host starves it further: p50
// about 170 ms against 35 at load 9, 0.9 s at load 17; the p99, which
// over 50 approvals is their slowest, 0.7 s on an idle host, 0.8-1.15 s
// at load 9, 4 s at load 17, 6 s once at load 12-14. There the figure is
// the detector's and the host's, not the product's, and no bound on it
// holds the product to anything a loaded host does not also break: the
// figures are logged, every filing must still be told (within
// eventually's bound), and the target is checked by runs without the
// race detector.
func TestNotificationLatency(t *testing.T) {
	total := 50
	if v := os.Getenv("NOTIFY_LATENCY_N"); v != "" {
		fmt.Sscan(v, &total)
	}
	path := sqliteFile(t)
	n := startNotifyNode(t, path, testKeys(t))
	rcv, url := newHookReceiver(t)
	addHook(t, n, "hook", url, "")
	n.start(t)
	filed := map[string]time.Time{}
	for i := range total {
		inv := callInv()
		inv.RunID = fmt.Sprintf("run-%d", i)
		start := time.Now()
		_, err := n.iv.Invoke(context.Background(), "email.send", map[string]any{"to": fmt.Sprintf("jo%d@acme.test", i)}, inv)
		var ar *invoke.ApprovalRequired
		if !errors.As(err, &ar) {
			t.Fatalf("err = %v", err)
		}
		filed[ar.ID] = start
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, "every filing to be told", func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return len(rcv.at) == total
	})
	var lat []time.Duration
	rcv.mu.Lock()
	for id, at := range rcv.at {
		lat = append(lat, at.Sub(filed[id]))
	}
	rcv.mu.Unlock()
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	t.Logf("filing to receipt over %d approvals: p50 %s, p90 %s, p99 %s, max %s", total, p(0.5), p(0.9), p(0.99), lat[len(lat)-1])
	if race.Enabled {
		t.Log("under the race detector the figures are the detector's: the 1s p99 target is checked without it")
		return
	}
	if p(0.99) > time.Second {
		t.Errorf("p99 %s, want at most 1s", p(0.99))
	}
}

// TestChannelToARefusedAddressIsDeadLetteredCoarsely: a channel stored
// before channels were checked (or whose name now resolves elsewhere)
// pointing at the cloud metadata service or a private address is never
// dialed: every attempt is refused by egress, and the dead letter the
// organization reads says only that, not what answered where.
func TestChannelToARefusedAddressIsDeadLetteredCoarsely(t *testing.T) {
	for name, path := range databases(t) {
		t.Run(name, func(t *testing.T) {
			n := startNotifyNode(t, path, testKeys(t), func(o *jobs.Options) { o.NotifyAttempts = 2 })
			var ids []string
			for _, url := range []string{"http://169.254.169.254/latest/meta-data/", "http://10.0.0.1:22/"} {
				c := &toolplane.NotificationChannel{ID: toolplane.NewID("nch_"), OrganizationID: "org-1", Name: url, Kind: toolplane.ChannelWebhook,
					Config: toolplane.ChannelConfig{URL: url}, CreatedBy: "root", CreatedAt: time.Now()}
				if err := n.store.InsertNotificationChannel(context.Background(), c); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, c.ID)
			}
			n.start(t)
			_, err := n.iv.Invoke(context.Background(), "email.send", map[string]any{"to": "jo@acme.test"}, callInv())
			var ar *invoke.ApprovalRequired
			if !errors.As(err, &ar) {
				t.Fatalf("err = %v", err)
			}
			for _, id := range ids {
				eventually(t, "the refused channel to be dead-lettered", func() bool {
					d, err := n.store.GetDelivery(context.Background(), "org-1", string(notify.ApprovalFiled), ar.ID, id)
					return err == nil && d.State == toolplane.DeliveryDead
				})
			}
			dead, err := n.notes.DeadLetters(context.Background(), 10, platformAdmin)
			if err != nil || len(dead) != 2 {
				t.Fatalf("dead letters = %+v, %v", dead, err)
			}
			for _, d := range dead {
				if d.Error != "destination not allowed by egress" || d.Attempts != 2 {
					t.Errorf("dead letter on %s: %q after %d attempts", d.ChannelID, d.Error, d.Attempts)
				}
			}
		})
	}
}
