// Package tlscert serves a TLS certificate from a pair of PEM files (a
// certificate chain and its private key) and takes a replacement of
// either file without a restart: certificates are renewed often (ACME,
// cert-manager, a service mesh's short-lived ones), and a restart to pick
// one up would drop every connection and every MCP stream.
//
// A replacement is noticed at a handshake, at most once per Interval, by
// the files' size and modification time. A pair that does not load (the
// key of another certificate, a file half written, a file removed) keeps
// the certificate already served and is logged: a renewal that goes
// wrong never takes the server off the air. Writing the two files one
// after the other is safe: the first write is a mismatched pair (logged,
// the old one kept), the second completes it.
package tlscert

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is how often, at most, the files are looked at again.
const DefaultInterval = time.Second

// Error says why a certificate pair cannot be served: which file, and
// what is wrong with it.
type Error struct {
	// File is the file at fault, or both names for a pair that does not
	// match.
	File string
	Err  error
}

func (e *Error) Error() string { return e.File + ": " + e.Err.Error() }

// Unwrap answers the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrMismatch: the private key is not the certificate's.
var ErrMismatch = errors.New("the private key does not match the certificate")

// Reloader serves the certificate of a pair of files, reloaded when they
// change. Its zero value is not usable: make one with New.
type Reloader struct {
	certFile, keyFile string
	// Interval is how often, at most, the files are looked at again; zero
	// is DefaultInterval.
	Interval time.Duration
	log      *slog.Logger

	cert    atomic.Pointer[tls.Certificate]
	checked atomic.Int64 // unix nanoseconds of the last look

	mu    sync.Mutex
	stamp [2]fileStamp // of the pair last tried, loaded or not
}

// fileStamp is what tells a file was replaced.
type fileStamp struct {
	size int64
	mod  time.Time
}

// New loads the pair certFile, keyFile, or answers an *Error saying which
// file is missing, unreadable, not PEM, or that the key is not the
// certificate's. log receives a replacement that does not load; nil is
// slog.Default().
func New(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log}
	stamp := r.stat()
	c, err := load(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	r.cert.Store(c)
	r.stamp = stamp
	r.checked.Store(time.Now().UnixNano())
	return r, nil
}

// The reasons a file of the pair is refused.
var (
	ErrNoCertificate = errors.New("no PEM CERTIFICATE block")
	ErrNoKey         = errors.New("no PEM PRIVATE KEY block")
)

// load reads and checks a pair, naming the file at fault.
func load(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, &Error{File: certFile, Err: err}
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, &Error{File: keyFile, Err: err}
	}
	var chain [][]byte
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, b.Bytes)
		}
	}
	if len(chain) == 0 {
		return nil, &Error{File: certFile, Err: ErrNoCertificate}
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, &Error{File: certFile, Err: err}
	}
	key, err := privateKey(keyPEM)
	if err != nil {
		return nil, &Error{File: keyFile, Err: err}
	}
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, &Error{File: certFile + ", " + keyFile, Err: ErrMismatch}
	}
	return &tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}, nil
}

// privateKey parses the first private key block of keyPEM: PKCS #8,
// PKCS #1 (RSA) or SEC 1 (EC).
func privateKey(keyPEM []byte) (crypto.Signer, error) {
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, ErrNoKey
		}
		if !strings.HasSuffix(b.Type, "PRIVATE KEY") {
			continue
		}
		var (
			k   any
			err error
		)
		switch b.Type {
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		}
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("a %T cannot sign", k)
		}
		return s, nil
	}
}

// Certificate answers the certificate served now.
func (r *Reloader) Certificate() *tls.Certificate { return r.cert.Load() }

// GetCertificate is tls.Config.GetCertificate: the certificate served,
// after a look at the files when Interval has passed since the last.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.maybeReload(time.Now())
	return r.cert.Load(), nil
}

// maybeReload looks at the files when Interval has passed.
func (r *Reloader) maybeReload(now time.Time) {
	every := r.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	last := r.checked.Load()
	if now.UnixNano()-last < int64(every) || !r.checked.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	r.Reload()
}

// Reload looks at the files now and serves the pair they hold when either
// changed since the last look; a pair that does not load is logged and the
// certificate served is kept. It reports whether a new certificate is
// served.
func (r *Reloader) Reload() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp := r.stat()
	if stamp == r.stamp {
		return false
	}
	// Tried once per change, loaded or not: a bad pair is logged once,
	// and the next write of either file is tried again.
	r.stamp = stamp
	c, err := load(r.certFile, r.keyFile)
	if err != nil {
		r.log.Error("TLS certificate not reloaded; the one served is kept", "err", err)
		return false
	}
	old := r.cert.Swap(c)
	r.log.Info("TLS certificate reloaded", "serial", c.Leaf.SerialNumber.Text(16), "not_after", c.Leaf.NotAfter,
		"previous_serial", old.Leaf.SerialNumber.Text(16))
	return true
}

// stat answers the files' stamps; a file that cannot be read has the zero
// stamp (so its return is a change).
func (r *Reloader) stat() [2]fileStamp {
	var s [2]fileStamp
	for i, f := range []string{r.certFile, r.keyFile} {
		if fi, err := os.Stat(f); err == nil {
			s[i] = fileStamp{size: fi.Size(), mod: fi.ModTime()}
		}
	}
	return s
}

// Config answers a server TLS configuration serving r's certificate, for
// HTTP/2 and HTTP/1.1 (net/http adds h2 to a server's NextProtos when
// serving TLS), TLS 1.2 at least.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}
}

// String names the files, for a log line.
func (r *Reloader) String() string { return fmt.Sprintf("%s (key %s)", r.certFile, r.keyFile) }
