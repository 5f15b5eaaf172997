//go:build unix

package tlscert_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolplane/toolplane/clientcert"
	"github.com/toolplane/toolplane/internal/certtest"
	"github.com/toolplane/toolplane/tlscert"
)

// BenchmarkTLSCall measures one small POST answered over loopback TLS, as
// an agent's call reaches toolplane serve --tls-cert: client and server
// in this process, so ns/op and allocs/op are both sides' CPU per call.
// "handshake" opens a new connection per call (TLS 1.3, ECDSA P-256, a
// full handshake each time); "keepalive" reuses one. The mTLS variants
// also present a client certificate, verified and mapped by
// clientcert.Authority in the handler as the door does (a chain verified
// once is remembered, so keep-alive and handshake alike pay the map and
// revocation lookup, not the signature check, after the first call).
func BenchmarkTLSCall(b *testing.B) {
	ca := certtest.NewCA(b, "bench CA")
	srvCert := ca.Issue(b, certtest.Leaf{Server: true})
	agent := ca.Issue(b, certtest.Leaf{SPIFFE: "spiffe://example.org/org/default/agent/bench"})
	dir := b.TempDir()
	r, err := tlscert.New(certtest.Write(b, dir, "c", srvCert.CertPEM), certtest.Write(b, dir, "k", srvCert.KeyPEM), nil)
	if err != nil {
		b.Fatal(err)
	}
	auth := clientcert.NewAuthority(ca.Pool())
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		if req.TLS != nil && len(req.TLS.PeerCertificates) > 0 {
			if _, err := auth.Authenticate(req, false, time.Now()); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		}
		w.Write([]byte(`{"result":{"ok":true}}`))
	})
	for _, mtls := range []bool{false, true} {
		cfg := r.Config()
		if mtls {
			cfg.ClientAuth, cfg.ClientCAs = tls.RequestClientCert, ca.Pool()
		}
		addr := serveWith(b, cfg, h)
		for _, keep := range []bool{false, true} {
			name := "handshake"
			if keep {
				name = "keepalive"
			}
			if mtls {
				name = "mtls-" + name
			}
			b.Run(name, func(b *testing.B) {
				tc := &tls.Config{RootCAs: ca.Pool()}
				if mtls {
					tc.Certificates = []tls.Certificate{agent.TLS}
				}
				tr := &http.Transport{TLSClientConfig: tc, DisableKeepAlives: !keep, MaxIdleConnsPerHost: 1}
				defer tr.CloseIdleConnections()
				c := &http.Client{Transport: tr}
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					res, err := c.Post("https://"+addr+"/v1/tools/demo.search_tickets/invoke", "application/json", strings.NewReader(`{"arguments":{"query":"refund"}}`))
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Fatalf("status %d", res.StatusCode)
					}
				}
				// The process's CPU (user and system, every thread) per
				// call: what a loaded server spends, apart from time spent
				// waiting on loopback.
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU answers the CPU time the process has used, in nanoseconds.
func processCPU() int64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return u.Utime.Nano() + u.Stime.Nano()
}

// serveWith serves h with cfg until the benchmark ends.
func serveWith(b *testing.B, cfg *tls.Config, h http.Handler) string {
	b.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
