package notify_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/notify"
)

// FuzzLinkCheck: no token but a signed one checks, and none panics.
func FuzzLinkCheck(f *testing.F) {
	st := newStoreOnly(f)
	links, err := notify.NewLinks(keyring(f), st, time.Hour, nil)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := links.Sign("org-1", "apr_1", "nch_1", time.Time{})
	f.Add(good)
	f.Add("e30.")
	f.Add(".")
	f.Add("eyJrIjoiazEiLCJvIjoib3JnLTEiLCJhIjoiYXByXzEifQ.AAAA")
	f.Fuzz(func(t *testing.T, token string) {
		err := links.Check(token, "apr_1")
		if token == good {
			if err != nil {
				t.Fatalf("the signed token: %v", err)
			}
			return
		}
		if err == nil {
			t.Fatalf("an unsigned token checks: %q", token)
		}
		if !errors.Is(err, notify.ErrLinkInvalid) && !errors.Is(err, notify.ErrLinkExpired) {
			t.Fatalf("refused with %v", err)
		}
	})
}

// FuzzMailHeaders: whatever a tool name or preview holds, the mail has
// the headers it is built with and no other.
func FuzzMailHeaders(f *testing.F) {
	f.Add("payments.refund", "Refund 12 EUR")
	f.Add("evil\r\nBcc: x@example.com", "a\nb\rc")
	f.Add("ünïcode\x00", "\r\n\r\n.")
	f.Fuzz(func(t *testing.T, tool, preview string) {
		p := &notify.Payload{Event: notify.ApprovalFiled, Delivery: "approval_filed/apr_1/nch_1", SentAt: time.Unix(0, 0).UTC(),
			Approval: &notify.ApprovalContext{ID: "apr_1", Tool: tool, Preview: preview, Status: "pending"}}
		m := string(notify.Mail("tp@example.com", []string{"ops@example.com"}, p))
		head, _, ok := strings.Cut(m, "\r\n\r\n")
		if !ok {
			t.Fatal("no blank line after the headers")
		}
		names := []string{}
		for _, line := range strings.Split(head, "\r\n") {
			name, _, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("header line without a name: %q", line)
			}
			names = append(names, name)
		}
		want := []string{"From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type", "Content-Transfer-Encoding"}
		if len(names) != len(want) {
			t.Fatalf("headers %q, want %q", names, want)
		}
		for i := range want {
			if names[i] != want[i] {
				t.Fatalf("headers %q, want %q", names, want)
			}
		}
	})
}
