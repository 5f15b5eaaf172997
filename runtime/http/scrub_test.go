package httpruntime

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// A downstream may quote a credential back in any form it handled it in:
// as sent, decoded, or encoded again into a URL or a form. Every such form
// of a released secret is scrubbed, in text and in a decoded answer.
func TestScrubberRemovesEveryFormOfASecret(t *testing.T) {
	t.Parallel()
	const (
		tok  = "tok/9f+a=b c&d"
		user = "ledger bot"
		pass = "pw/x+y=z&q"
	)
	rel := &toolplane.Released{Connection: &toolplane.Connection{ID: "con_1"},
		Secrets: toolplane.Secrets{Token: tok, Username: user, Password: pass}}
	s := newScrubber(rel)
	for _, tt := range []struct{ name, form, secret string }{
		{"token", tok, tok},
		{"token query-escaped", url.QueryEscape(tok), tok},
		{"token path-escaped", url.PathEscape(tok), tok},
		{"password", pass, pass},
		{"password query-escaped", url.QueryEscape(pass), pass},
		{"password path-escaped", url.PathEscape(pass), pass},
		{"basic credential", base64.StdEncoding.EncodeToString([]byte(user + ":" + pass)), pass},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text := "you sent " + tt.form + ", which is wrong"
			if got := s.scrub(text); strings.Contains(got, tt.form) {
				t.Errorf("scrub left it: %q", got)
			}
			doc := map[string]any{"echo": text, tt.form: []any{text}}
			var raw strings.Builder
			enc := json.NewEncoder(&raw)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(s.value(doc)); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(raw.String(), tt.form) || strings.Contains(raw.String(), tt.secret) {
				t.Errorf("value left it: %s", raw.String())
			}
		})
	}
}

// TestScrubbingACleanAnswerAllocatesNothing: an answer that holds no
// released secret, as nearly every answer is, is left as it was, not
// rebuilt string by string. Not parallel: it counts the process's
// allocations.
func TestScrubbingACleanAnswerAllocatesNothing(t *testing.T) {
	rel := &toolplane.Released{Connection: &toolplane.Connection{ID: "con_1"},
		Secrets: toolplane.Secrets{Token: "tok-9f31", Username: "bot", Password: "pw-77"}}
	s := newScrubber(rel)
	var doc any
	if err := json.Unmarshal([]byte(`{"id":"it_1","name":"Widget","tags":["a","b",{"c":"d"}],"n":3,"ok":true}`), &doc); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { s.value(doc) }); allocs != 0 {
		t.Errorf("scrubbing a clean answer made %v allocations, want 0", allocs)
	}
}
