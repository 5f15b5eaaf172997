package notify_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"mime/quotedprintable"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
)

// mailbox is an SMTP server's backend that keeps what it is sent, and
// accepts PLAIN authentication with one user's password over TLS only.
type mailbox struct {
	mu    sync.Mutex
	mails []mailed
}

type mailed struct {
	from string
	to   []string
	data []byte
	tls  bool
	auth string
}

func (m *mailbox) NewSession(c *smtp.Conn) (smtp.Session, error) {
	_, isTLS := c.TLSConnectionState()
	return &session{box: m, tls: isTLS}, nil
}

type session struct {
	box  *mailbox
	tls  bool
	cur  mailed
	auth string
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "toolplane" || pass != password {
			return errors.New("bad credentials")
		}
		s.auth = user
		return nil
	}), nil
}
func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.cur.from = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data, s.cur.tls, s.cur.auth = b, s.tls, s.auth
	s.box.mu.Lock()
	s.box.mails = append(s.box.mails, s.cur)
	s.box.mu.Unlock()
	s.cur = mailed{}
	return nil
}
func (s *session) Reset()        { s.cur = mailed{} }
func (s *session) Logout() error { return nil }

// selfSigned answers a certificate for 127.0.0.1 and its PEM.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "smtp test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// smtpServer starts an SMTP server on loopback; with TLS it offers
// STARTTLS under a self-signed certificate.
func smtpServer(t *testing.T, withTLS bool) (*mailbox, int, string) {
	t.Helper()
	box := &mailbox{}
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	var caPEM string
	if withTLS {
		cert, p := selfSigned(t)
		srv.TLSConfig, caPEM = &tls.Config{Certificates: []tls.Certificate{cert}}, p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return box, ln.Addr().(*net.TCPAddr).Port, caPEM
}

func TestEmailOverSTARTTLS(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	box, port, caPEM := smtpServer(t, true)
	ch, err := s.Create(t.Context(), notify.NewChannel{Name: "mail", Kind: toolplane.ChannelEmail,
		Config: toolplane.ChannelConfig{Host: "127.0.0.1", Port: port, From: "toolplane@example.com",
			To: []string{"approvers@example.com", "lead@example.com"}, Username: "toolplane", CAPEM: caPEM},
		Secrets: toolplane.ChannelSecrets{Password: password}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	a := fileApproval(t, st, "")
	// A tool name from outside with a line break: it reaches the subject,
	// which must stay one header.
	a.Tool = "evil.tool\r\nBcc: victim@example.com"
	if ok, err := st.UpdateApproval(t.Context(), a); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := s.Send(t.Context(), notify.Delivery{Org: "org-1", Event: notify.ApprovalFiled, Subject: a.ID, Channel: ch.ID}, 1); err != nil {
		t.Fatal(err)
	}
	if len(box.mails) != 1 {
		t.Fatalf("%d mails", len(box.mails))
	}
	m := box.mails[0]
	if !m.tls || m.auth != "toolplane" || m.from != "toolplane@example.com" || strings.Join(m.to, ",") != "approvers@example.com,lead@example.com" {
		t.Errorf("mail tls=%v auth=%q from=%q to=%v", m.tls, m.auth, m.from, m.to)
	}
	head, body, _ := bytes.Cut(m.data, []byte("\r\n\r\n"))
	for _, line := range strings.Split(string(head), "\r\n") {
		if strings.HasPrefix(strings.ToLower(line), "bcc:") {
			t.Errorf("a header was injected: %q", line)
		}
	}
	if !bytes.Contains(head, []byte("Subject: Approval needed: evil.tool  Bcc: victim@example.com")) {
		t.Errorf("subject not kept on one line:\n%s", head)
	}
	body, err = io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte("console/approvals/"+a.ID)) || bytes.Contains(body, []byte("sk_live_")) {
		t.Errorf("body lacks the link or shows the credential:\n%s", body)
	}
	if bytes.Contains(m.data, []byte(password)) {
		t.Error("the mail holds the SMTP password")
	}
}

func TestEmailRefusesWithoutSTARTTLS(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	box, port, _ := smtpServer(t, false)
	cfg := toolplane.ChannelConfig{Host: "127.0.0.1", Port: port, From: "toolplane@example.com", To: []string{"ops@example.com"}}
	strict, err := s.Create(t.Context(), notify.NewChannel{Name: "strict", Kind: toolplane.ChannelEmail, Config: cfg}, admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Insecure = true
	relay, err := s.Create(t.Context(), notify.NewChannel{Name: "local relay", Kind: toolplane.ChannelEmail, Config: cfg}, admin)
	if err != nil {
		t.Fatal(err)
	}
	a := fileApproval(t, st, "")
	d := notify.Delivery{Org: "org-1", Event: notify.ApprovalFiled, Subject: a.ID, Channel: strict.ID}
	if err := s.Send(t.Context(), d, 1); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("strict channel without STARTTLS: %v, want refused", err)
	}
	if len(box.mails) != 0 {
		t.Fatal("mail sent in clear")
	}
	d.Channel = relay.ID
	if err := s.Send(t.Context(), d, 1); err != nil {
		t.Fatalf("loopback relay the operator opted out for: %v", err)
	}
	if len(box.mails) != 1 {
		t.Fatalf("%d mails", len(box.mails))
	}
}

// TestHangingEndpointBounded: an endpoint that accepts and never answers
// holds an attempt no longer than the timeout.
func TestHangingEndpointBounded(t *testing.T) {
	t.Parallel()
	st := newStoreOnly(t)
	s, err := notify.New(notify.Config{Store: st, Keys: keyring(t), Timeout: 300 * time.Millisecond, AllowCIDRs: testReceivers})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	hook, err := s.Create(t.Context(), notify.NewChannel{Name: "hook", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: "http://127.0.0.1:" + port + "/"}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	mail, err := s.Create(t.Context(), notify.NewChannel{Name: "mail", Kind: toolplane.ChannelEmail,
		Config: toolplane.ChannelConfig{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, From: "a@example.com", To: []string{"b@example.com"}}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	a := fileApproval(t, st, "")
	for _, ch := range []string{hook.ID, mail.ID} {
		start := time.Now()
		err := s.Send(t.Context(), notify.Delivery{Org: "org-1", Event: notify.ApprovalFiled, Subject: a.ID, Channel: ch}, 1)
		if err == nil {
			t.Fatalf("%s: a hanging endpoint delivered", ch)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: attempt took %s, want about the 300ms timeout", ch, d)
		}
	}
}
