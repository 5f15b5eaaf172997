package slack_test

import (
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/slack"
)

// BenchmarkVerify is the signature check every press pays before
// anything is read: one HMAC-SHA256 over a typical press's body.
func BenchmarkVerify(b *testing.B) {
	body := make([]byte, 6<<10)
	now := time.Now()
	h := sign(signing, now, body)
	ts, sig := h.Get("X-Slack-Request-Timestamp"), h.Get("X-Slack-Signature")
	for b.Loop() {
		if err := slack.Verify(signing, ts, sig, body, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPress is a press that decides, end to end on the embedded
// store: verified, its replay recorded, the link and the key read, the
// approval decided with its audit event, and the message updated at a
// local fake of Slack.
func BenchmarkPress(b *testing.B) {
	w := newWorldTB(b)
	for b.Loop() {
		b.StopTimer()
		a := w.file(b, "org-1", "finance", 0)
		body := w.press("T1", "UALICE", notify.ActionApprove, a.ID)
		h := sign(signing, time.Now(), body)
		b.StartTimer()
		if code := w.send(b, "org-1", w.channel, h, body); code != 200 {
			b.Fatalf("answered %d", code)
		}
		b.StopTimer()
		if s := w.status(b, "org-1", a.ID); s != toolplane.ApprovalApproved {
			b.Fatalf("approval %s", s)
		}
		w.slack.take()
		b.StartTimer()
	}
}
