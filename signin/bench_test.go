package signin_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/toolplane/toolplane"
)

// BenchmarkSession is what every signed-in page pays to learn who is
// signed in: the cookie's hash looked up in SQLite, the times judged, and
// for a key's session the key read again (so a revocation ends it at
// once). No touch is written within a tenth of the idle timeout.
func BenchmarkSession(b *testing.B) {
	for _, method := range []string{toolplane.SignInOIDC, toolplane.SignInAPIKey} {
		b.Run(method, func(b *testing.B) {
			w := newWorld(b)
			br := w.browser()
			if method == toolplane.SignInOIDC {
				br.signIn()
			} else {
				key := w.mint(toolplane.CredentialPerson, "ada", nil)
				br.post("/signin/key", url.Values{"csrf": {br.csrf("/signin")}, "key": {key}}, w.base)
			}
			c := br.cookie("toolplane_session")
			if c == nil {
				b.Fatal("not signed in")
			}
			req := httptest.NewRequest(http.MethodGet, w.base+"/whoami", nil)
			req.AddCookie(c)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := w.svc.Session(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
