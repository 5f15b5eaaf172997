package slack_test

import (
	"net/url"
	"testing"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/slack"
)

// FuzzParsePayload holds the payload parser to what the endpoint relies
// on, whatever Slack (or a forger with the signing secret) sends: it never
// panics, and a press it answers as a decision names an approval of a
// bounded length and a workspace and user shaped as Slack's ids.
func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{
		`{"type":"block_actions","team":{"id":"T1"},"user":{"id":"U1"},"actions":[{"action_id":"toolplane_approve","value":"apr_1"}],"container":{"channel_id":"C1","message_ts":"1.2"},"response_url":"https://hooks.slack.com/actions/x"}`,
		`{"type":"block_actions","team":{"id":"T1"},"user":{"id":"U1"},"actions":[{"action_id":"toolplane_open"}]}`,
		`{"type":"view_submission"}`,
		`{"type":"block_actions","team":{"id":"t<1>"},"user":{"id":"U1"}}`,
		`{"actions":[{},{}]}`,
		`null`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := slack.ParsePayload(raw)
		if err != nil {
			if p != nil {
				t.Fatalf("an error with a press: %+v", p)
			}
			return
		}
		if !p.Button {
			if p.Approval != "" {
				t.Fatalf("no button, but approval %q", p.Approval)
			}
			return
		}
		if p.Approval == "" || len(p.Approval) > toolplane.MaxRefLen {
			t.Fatalf("approval %q", p.Approval)
		}
		for _, id := range []string{p.Team, p.User} {
			if id == "" || len(id) > 32 || !utf8.ValidString(id) {
				t.Fatalf("id %q", id)
			}
			for _, r := range id {
				if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
					t.Fatalf("id %q", id)
				}
			}
		}
		// The form wrapping it parses to the same press.
		q, err := slack.ParseForm([]byte(url.Values{"payload": {string(raw)}}.Encode()))
		if err != nil || *q != *p {
			t.Fatalf("form: %+v, %v; payload: %+v", q, err, p)
		}
	})
}
