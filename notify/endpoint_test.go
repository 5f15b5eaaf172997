package notify_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/sqlite"
)

// hookDelivery creates a webhook channel to url, files a pending approval
// and answers the one delivery of event about it.
func hookDelivery(t *testing.T, s *notify.Service, st *sqlite.Store, url string, event notify.Event) notify.Delivery {
	t.Helper()
	if _, err := s.Create(t.Context(), notify.NewChannel{Name: "hook", Kind: toolplane.ChannelWebhook,
		Config: toolplane.ChannelConfig{URL: url}, Secrets: toolplane.ChannelSecrets{HMACKey: hmacKey}}, admin); err != nil {
		t.Fatal(err)
	}
	ds, err := s.ForApproval(t.Context(), fileApproval(t, st, ""), event)
	if err != nil || len(ds) != 1 {
		t.Fatalf("ForApproval = %v, %v; want one delivery", ds, err)
	}
	return ds[0]
}

// A delivery is delivered only when the endpoint configured answers 2xx
// itself: an error status is a failed attempt, and a redirect is not
// followed (the signed request is for the URL configured), so it fails
// too and the place it points to is never sent the request.
func TestAnEndpointThatFailsOrRedirectsIsNotDelivered(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusInternalServerError) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/fail", "/moved"} {
		t.Run(path, func(t *testing.T) {
			s, st := newService(t)
			if err := s.Send(t.Context(), hookDelivery(t, s, st, srv.URL+path, notify.ApprovalFiled), 1); err == nil {
				t.Fatalf("a send to %s succeeded", path)
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("a redirect was followed %d times", n)
	}
}

// A notice that an approval is about to expire is sent while the approval
// still waits for a person.
func TestAnExpiringNoticeIsSentWhileThePersonCanAct(t *testing.T) {
	t.Parallel()
	s, st := newService(t)
	rcv := &receiver{key: []byte(hmacKey)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	if err := s.Send(t.Context(), hookDelivery(t, s, st, srv.URL, notify.ApprovalExpiring), 1); err != nil {
		t.Fatal(err)
	}
	if len(rcv.got) != 1 || rcv.got[0].Event != notify.ApprovalExpiring {
		t.Fatalf("receiver got %+v, refused %v; want the expiring notice", rcv.got, rcv.refused)
	}
}
