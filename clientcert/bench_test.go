package clientcert_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/toolplane/toolplane/clientcert"
	"github.com/toolplane/toolplane/internal/certtest"
)

// BenchmarkVerify is a certificate's cost per request: "remembered" is a
// chain verified before (a digest, a map read, the revocation lookup),
// what every request but a workload's first pays; "first" verifies the
// signature chain and maps the identity, as for a certificate not seen
// within the cache's five minutes.
func BenchmarkVerify(b *testing.B) {
	ca := certtest.NewCA(b, "bench CA")
	leaf := ca.Issue(b, certtest.Leaf{SPIFFE: "spiffe://example.org/org/default/agent/bench"}).Cert
	now := time.Now()
	b.Run("remembered", func(b *testing.B) {
		a := clientcert.NewAuthority(ca.Pool())
		if _, err := a.Verify([]*x509.Certificate{leaf}, now); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Verify([]*x509.Certificate{leaf}, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a := clientcert.NewAuthority(ca.Pool())
			if _, err := a.Verify([]*x509.Certificate{leaf}, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
