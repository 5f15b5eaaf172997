package slack_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/slack"
)

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	body := []byte("payload=%7B%7D")
	h := sign(signing, now, body)
	ts, sig := h.Get("X-Slack-Request-Timestamp"), h.Get("X-Slack-Signature")
	cases := []struct {
		name    string
		secret  toolplane.SecretString
		ts, sig string
		body    []byte
		at      time.Time
		want    error
	}{
		{"signed", signing, ts, sig, body, now, nil},
		{"4m59s later", signing, ts, sig, body, now.Add(4*time.Minute + 59*time.Second), nil},
		{"5m01s later", signing, ts, sig, body, now.Add(5*time.Minute + time.Second), slack.ErrStale},
		{"5m01s earlier", signing, ts, sig, body, now.Add(-5*time.Minute - time.Second), slack.ErrStale},
		{"no timestamp", signing, "", sig, body, now, slack.ErrStale},
		{"another secret", "another-signing-secret-0000", ts, sig, body, now, slack.ErrSignature},
		{"no secret configured", "", ts, sig, body, now, slack.ErrSignature},
		{"another body", signing, ts, sig, append(body, 'x'), now, slack.ErrSignature},
		{"v1 scheme", signing, ts, "v1=" + sig[3:], body, now, slack.ErrSignature},
		{"upper-case hex", signing, ts, "v0=" + strings.ToUpper(sig[3:]), body, now, slack.ErrSignature},
		{"truncated", signing, ts, sig[:len(sig)-2], body, now, slack.ErrSignature},
		{"timestamp not the one signed", signing, "1700000001", sig, body, now, slack.ErrSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if err := slack.Verify(c.secret, c.ts, c.sig, c.body, c.at); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
				t.Errorf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}
