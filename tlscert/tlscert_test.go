package tlscert_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/certtest"
	"github.com/toolplane/toolplane/tlscert"
)

// A pair that cannot be served fails New, naming the file at fault and
// why: a missing file, one that is not PEM, a key that is not the
// certificate's.
func TestNewRefusesABadPair(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "test CA")
	a, b := ca.Issue(t, certtest.Leaf{Server: true}), ca.Issue(t, certtest.Leaf{Server: true})
	dir := t.TempDir()
	cert := certtest.Write(t, dir, "a.crt", a.CertPEM)
	key := certtest.Write(t, dir, "a.key", a.KeyPEM)
	otherKey := certtest.Write(t, dir, "b.key", b.KeyPEM)
	junk := certtest.Write(t, dir, "junk.pem", []byte("not a certificate\n"))
	unreadable := certtest.Write(t, dir, "locked.key", a.KeyPEM)
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cert, key, file string
		want                  error
	}{
		{"missing certificate", filepath.Join(dir, "none.crt"), key, "none.crt", fs.ErrNotExist},
		{"missing key", cert, filepath.Join(dir, "none.key"), "none.key", fs.ErrNotExist},
		{"certificate not PEM", junk, key, "junk.pem", tlscert.ErrNoCertificate},
		{"key not PEM", cert, junk, "junk.pem", tlscert.ErrNoKey},
		{"key of another certificate", cert, otherKey, "b.key", tlscert.ErrMismatch},
		{"key swapped for the certificate", key, cert, "a.key", tlscert.ErrNoCertificate},
	}
	if os.Geteuid() != 0 { // root reads a file whatever its mode
		tests = append(tests, struct {
			name, cert, key, file string
			want                  error
		}{"unreadable key", cert, unreadable, "locked.key", fs.ErrPermission})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tlscert.New(tt.cert, tt.key, nil)
			var te *tlscert.Error
			if !errors.As(err, &te) || !errors.Is(err, tt.want) {
				t.Fatalf("New: %v, want a *tlscert.Error wrapping %v", err, tt.want)
			}
			if !strings.Contains(te.File, tt.file) {
				t.Errorf("the error names %q, want %q in it", te.File, tt.file)
			}
		})
	}
}

// serve serves h over TLS with r's configuration, as toolplane serve
// does (http.Server.ServeTLS, which adds HTTP/2), until the test ends.
func serve(t *testing.T, r *tlscert.Reloader, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: r.Config(), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// servedSerial answers the serial of the certificate srv serves, on a new
// connection.
func servedSerial(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// logBuffer is a log a test reads while the server writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// A served certificate replaced on disk is served from the next handshake
// on, with no restart; a replacement that does not load (a key of another
// certificate, a certificate half written) keeps the one served, logged,
// and the pair made whole again is served.
func TestReplacedFilesAreServedWithoutRestart(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "test CA")
	first := ca.Issue(t, certtest.Leaf{Server: true, Serial: 0x1001})
	second := ca.Issue(t, certtest.Leaf{Server: true, Serial: 0x2002})
	third := ca.Issue(t, certtest.Leaf{Server: true, Serial: 0x3003})
	dir := t.TempDir()
	cert := certtest.Write(t, dir, "tls.crt", first.CertPEM)
	key := certtest.Write(t, dir, "tls.key", first.KeyPEM)
	var logs logBuffer
	r, err := tlscert.New(cert, key, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.Interval = time.Millisecond
	addr := serve(t, r, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	if got := servedSerial(t, addr); got != "1001" {
		t.Fatalf("served serial %s, want 1001", got)
	}
	// replace writes the files as a renewal does: into place, one after
	// the other, each a new modification (the stamps are size and time).
	replace := func(name string, data []byte) {
		t.Helper()
		tmp := certtest.Write(t, dir, name+".new", data)
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Duration(len(data)) * time.Millisecond)
		if err := os.Chtimes(filepath.Join(dir, name), later, later); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	replace("tls.crt", second.CertPEM)
	replace("tls.key", second.KeyPEM)
	if got := servedSerial(t, addr); got != "2002" {
		t.Fatalf("after the replacement the served serial is %s, want 2002", got)
	}
	// Half a renewal: the certificate without its key.
	replace("tls.crt", third.CertPEM)
	if got := servedSerial(t, addr); got != "2002" {
		t.Fatalf("with a mismatched pair on disk the served serial is %s, want the old 2002", got)
	}
	if !strings.Contains(logs.String(), "not reloaded") || !strings.Contains(logs.String(), "does not match") {
		t.Errorf("a mismatched pair is not logged: %s", logs.String())
	}
	// A file truncated mid-write keeps the old one as well.
	replace("tls.key", []byte("-----BEGIN PRIVATE KEY-----\nAAAA"))
	if got := servedSerial(t, addr); got != "2002" {
		t.Fatalf("with a truncated key on disk the served serial is %s, want the old 2002", got)
	}
	replace("tls.key", third.KeyPEM)
	if got := servedSerial(t, addr); got != "3003" {
		t.Fatalf("once the pair is whole the served serial is %s, want 3003", got)
	}
}

// The served configuration offers HTTP/2, which a client negotiates.
func TestServesHTTP2(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "test CA")
	leaf := ca.Issue(t, certtest.Leaf{Server: true})
	dir := t.TempDir()
	r, err := tlscert.New(certtest.Write(t, dir, "c", leaf.CertPEM), certtest.Write(t, dir, "k", leaf.KeyPEM), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(r.Proto)) }))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}}
	res, err := c.Get("https://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", res.Proto)
	}
}
