package auditchain

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// decodeCorpus is lines as an export writes them and lines it never
// writes (escapes, other spellings, repeated names, null, errors).
func decodeCorpus(t testing.TB) []string {
	full := event("org-1", 7)
	full.Kind, full.Subject, full.TenantID, full.StepPath = "key.created", "key_1", "tenant-a", "0/2"
	full.PrincipalID, full.UserID, full.KeyID, full.Effect, full.Destructive = "p", "u", "k", toolplane.EffectWrite, true
	full.Reason, full.ApprovalID, full.AuthorizedBy, full.ApproverID = "élan ✓ 𝄞", "apr", "rule", "alice"
	full.OutputHash, full.CostCents, full.Attempts, full.ConnectionID, full.ParentID = "sha256:ff", -42, 3, "conn", "aud_0"
	full.PolicyBundle, full.PolicyRule, full.PolicyDegraded = 9, "r1", true
	full.PolicyInput = json.RawMessage(`[1,{"a":"\u003c\"x\\"},null,true,2.5e3]`)
	full.Replayed = true
	full.PIIFields = []string{}
	Seal(&full, 7, make([]byte, HashSize))
	escaped := full
	escaped.Reason = "a <b> & \"quoted\" \\ \n\t\u2028 \x01"
	offset := full
	offset.CreatedAt = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.FixedZone("", 3600))
	var lines []string
	for _, e := range []toolplane.AuditEvent{event("org-1", 1), full, escaped, offset, {}, chain("org-2", 3)[2]} {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
		indented, _ := json.MarshalIndent(e, " ", "\t")
		lines = append(lines, string(indented)+"\r\n")
	}
	base := lines[0]
	edit := func(old, new string) string { return strings.Replace(base, old, new, 1) }
	lines = append(lines,
		`{}`, ` { } `, `null`, `[]`, ``, `{`, `{"id":"a"`, `{"id":"a",}`, `{"id":"a"} x`, `{"id":"a"}{}`,
		`{"ID":"upper"}`, `{"Organization_ID":"o"}`, `{"unknown":1,"id":"a"}`, `{"id":"a","id":"b"}`,
		`{"id":null}`, `{"arguments":null}`, `{"pii_fields_touched":null}`, `{"hash":null}`,
		`{"seq":1.0}`, `{"seq":1e3}`, `{"seq":01}`, `{"seq":-0}`, `{"seq":-}`, `{"seq":"1"}`, `{"seq":99999999999999999999}`,
		`{"attempts":9223372036854775807}`, `{"cost_cents":-9223372036854775808}`,
		`{"replayed":tru}`, `{"replayed":truex}`, `{"replayed":1}`, `{"replayed":false}`,
		`{"pii_fields_touched":[]}`, `{"pii_fields_touched":[ "a" , "b" ]}`, `{"pii_fields_touched":["a",]}`, `{"pii_fields_touched":[1]}`,
		`{"arguments":{}}`, `{"arguments":"str"}`, `{"arguments":12}`, `{"arguments":{"a":[1,2,{"b":"}\"]"}]}}`,
		`{"arguments":{"a":}}`, `{"arguments":{"a":"\x01"}}`, `{"arguments":[1,2}`,
		`{"hash":""}`, `{"hash":"AAEC"}`, `{"hash":"AAE"}`, `{"hash":"AA\nEC"}`, `{"hash":"!!!!"}`, `{"prev_hash":"AAECAw=="}`,
		`{"created_at":"2026-01-02T03:04:05Z"}`, `{"created_at":"2026-01-02"}`, `{"created_at":1}`, `{"created_at":"2026-01-02T03:04:05.999999999+05:30"}`,
		`{"tool":"a\u0062c"}`, `{"tool":"bad`+"\xff"+`utf8"}`, `{"tool":"tab`+"\t"+`"}`, `{"tool":"ok"`+"\n}",
		`{"kind":"x","effect":"write","source":"mcp"}`,
		edit(`"id":"`, `"id" : "`), edit(`"run_id":"run-1"`, `"run_id":"run\/1"`),
		edit(`"latency_micros":1234`, `"latency_micros":12.0`), edit(`"replayed":false`, `"replayed":null`),
	)
	return lines
}

// TestDecodeEventIsUnmarshal: DecodeEvent answers what json.Unmarshal
// does into a zero event, for every line, the same event or the same
// error, whatever path it took.
func TestDecodeEventIsUnmarshal(t *testing.T) {
	t.Parallel()
	for i, line := range decodeCorpus(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			sameAsUnmarshal(t, []byte(line))
		})
	}
}

// TestDecodeEventFast: what an export writes takes the direct path.
func TestDecodeEventFast(t *testing.T) {
	t.Parallel()
	for _, e := range chain("org-1", 20) {
		b, _ := json.Marshal(e)
		var got toolplane.AuditEvent
		if !decodeFast(b, &got) || !reflect.DeepEqual(got, e) {
			t.Fatalf("decodeFast(%s) = %+v", b, got)
		}
	}
}

// FuzzDecodeEvent: any bytes decode as json.Unmarshal decodes them.
func FuzzDecodeEvent(f *testing.F) {
	for _, line := range decodeCorpus(f) {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) { sameAsUnmarshal(t, line) })
}

func sameAsUnmarshal(t *testing.T, line []byte) {
	t.Helper()
	var want, got toolplane.AuditEvent
	werr := json.Unmarshal(line, &want)
	gerr := DecodeEvent(line, &got)
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("%q: error %v, json.Unmarshal's %v", line, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got  %#v\n want %#v", line, got, want)
	}
}
