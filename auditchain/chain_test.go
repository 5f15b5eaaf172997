package auditchain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

func event(org string, n int) toolplane.AuditEvent {
	return toolplane.AuditEvent{
		ID: fmt.Sprintf("aud_%08d", n), OrganizationID: org, RunID: "run-1", AgentID: "agent-billing",
		Tool: "payments.refund_order", ToolVersion: "2.1.0", Source: toolplane.SourceMCP, Outcome: "ok",
		ArgumentsHash: "sha256:0f3a", Key: "run-1:0/2:0f3a", PolicyDecision: "allow", Effect: toolplane.EffectWrite,
		Arguments: json.RawMessage(`{"amount_cents":500,"order_id":"o-1","note":"<b>&"}`),
		PIIFields: []string{"customer.email"}, Classifications: []string{"pii"},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		LatencyMicros: 1234, CreatedAt: time.Unix(1_780_000_000, int64(n)*1000).UTC(),
	}
}

func chain(org string, n int) []toolplane.AuditEvent {
	out := make([]toolplane.AuditEvent, n)
	var prev []byte
	for i := range out {
		e := event(org, i+1)
		Normalize(&e)
		Seal(&e, int64(i+1), prev)
		prev = e.Hash
		out[i] = e
	}
	return out
}

// TestDigestSurvivesJSON: an event sealed as stored verifies after a JSON
// round trip (what an export and offline verification make of it).
func TestDigestSurvivesJSON(t *testing.T) {
	t.Parallel()
	evs := chain("org-1", 5)
	for i := range evs {
		b, err := json.Marshal(evs[i])
		if err != nil {
			t.Fatal(err)
		}
		var back toolplane.AuditEvent
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		evs[i] = back
	}
	if r := Verify(Input{Events: evs}); !r.OK || r.Events != 5 {
		t.Fatalf("verify after JSON = %+v, %+v", r, r.Break)
	}
}

// TestVerifyKinds: in memory, each kind of change is named where it is.
func TestVerifyKinds(t *testing.T) {
	t.Parallel()
	keys := &KeySet{}
	if _, err := keys.Generate(time.Now()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		tamper func([]toolplane.AuditEvent) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint)
		kind   Kind
		seq    int64
	}{
		{"changed", func(e []toolplane.AuditEvent) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			e[6].CostCents = 1
			return e, nil
		}, Changed, 7},
		{"deleted", func(e []toolplane.AuditEvent) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			return append(e[:3:3], e[4:]...), nil
		}, Deleted, 4},
		{"lines swapped", func(e []toolplane.AuditEvent) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			e[2], e[3] = e[3], e[2]
			return e, nil
		}, Reordered, 3},
		{"inserted twice numbered", func(e []toolplane.AuditEvent) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			extra := e[4]
			extra.ID = "forged"
			return append(e[:5:5], append([]toolplane.AuditEvent{extra}, e[5:]...)...), nil
		}, Inserted, 5},
		{"forged checkpoint", func(e []toolplane.AuditEvent) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			cp := toolplane.AuditCheckpoint{OrganizationID: "org-1", Seq: 5, Hash: e[4].Hash, CreatedAt: time.Now()}
			if err := keys.Sign(&cp); err != nil {
				t.Fatal(err)
			}
			cp.Hash = e[3].Hash
			return e, []toolplane.AuditCheckpoint{cp}
		}, Forged, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			evs, cps := c.tamper(chain("org-1", 10))
			r := Verify(Input{Events: evs, Checkpoints: cps, Keys: keys})
			if r.OK || r.Break.Kind != c.kind || r.Break.Seq != c.seq {
				t.Fatalf("verify = %+v, break %+v; want %s at %d", r, r.Break, c.kind, c.seq)
			}
		})
	}
}

// BenchmarkVerify: events verified a second, in memory (the walk, two
// SHA-256 a row), the target being 200,000.
func BenchmarkVerify(b *testing.B) {
	const n = 10_000
	evs := chain("org-1", n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := Verify(Input{Events: evs}); !r.OK {
			b.Fatal(r.Break)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkVerifyJSONL: the same from JSON Lines, decoding included (what
// offline verification of an export costs, decoded as the command does).
func BenchmarkVerifyJSONL(b *testing.B) {
	const n = 10_000
	var lines [][]byte
	for _, e := range chain("org-1", n) {
		l, _ := json.Marshal(e)
		lines = append(lines, l)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		evs := make([]toolplane.AuditEvent, n)
		for i, l := range lines {
			if err := DecodeEvent(l, &evs[i]); err != nil {
				b.Fatal(err)
			}
		}
		if r := Verify(Input{Events: evs}); !r.OK {
			b.Fatal(r.Break)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

// verifySequential is Verify with every row hashed in the walk, none
// before.
func verifySequential(in Input) Report { return verify(in, false) }

// TestVerifyHashedBefore: on a trail long enough to be hashed on every
// core first, each kind of change is named where it is, as the walk
// hashing row after row names it, at a worker's block's edge and inside
// one.
func TestVerifyHashedBefore(t *testing.T) {
	t.Parallel()
	const n = 3 * parallelFrom / 2
	keys := &KeySet{}
	if _, err := keys.Generate(time.Now()); err != nil {
		t.Fatal(err)
	}
	type tamper func([]toolplane.AuditEvent, int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint)
	kinds := []struct {
		name   string
		tamper tamper
		kind   Kind
		at     int64 // the break's Seq, from the row tampered with (k+1)
	}{
		{"intact", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			return e, nil
		}, "", 0},
		{"changed", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			e[k].Outcome = "denied"
			return e, nil
		}, Changed, 0},
		{"deleted", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			return append(e[:k:k], e[k+1:]...), nil
		}, Deleted, 0},
		{"reordered", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			e[k], e[k+1] = e[k+1], e[k]
			return e, nil
		}, Reordered, 0},
		{"renumbered", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			e[k].Seq, e[k+1].Seq = e[k+1].Seq, e[k].Seq
			e[k], e[k+1] = e[k+1], e[k]
			return e, nil
		}, Reordered, 0},
		{"sealed after a row that is not there", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			Seal(&e[k], e[k].Seq, Link(nil, 1, []byte("nothing")))
			return e, nil
		}, Deleted, 0},
		{"inserted", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			extra := e[k]
			extra.ID = "forged"
			return append(e[:k+1:k+1], append([]toolplane.AuditEvent{extra}, e[k+1:]...)...), nil
		}, Inserted, 0},
		{"forged checkpoint", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			cp := toolplane.AuditCheckpoint{OrganizationID: "org-1", Seq: e[k].Seq, Hash: e[k].Hash, CreatedAt: time.Now()}
			if err := keys.Sign(&cp); err != nil {
				t.Fatal(err)
			}
			cp.Hash = e[k-1].Hash
			return e, []toolplane.AuditCheckpoint{cp}
		}, Forged, 0},
		{"rewritten", func(e []toolplane.AuditEvent, k int) ([]toolplane.AuditEvent, []toolplane.AuditCheckpoint) {
			cp := toolplane.AuditCheckpoint{OrganizationID: "org-1", Seq: e[k].Seq, Hash: e[k].Hash, CreatedAt: time.Now()}
			if err := keys.Sign(&cp); err != nil {
				t.Fatal(err)
			}
			// Every row from k-1 on sealed again after a change.
			e[k-1].Outcome = "denied"
			prev := e[k-2].Hash
			for i := k - 1; i < len(e); i++ {
				Seal(&e[i], e[i].Seq, prev)
				prev = e[i].Hash
			}
			return e, []toolplane.AuditCheckpoint{cp}
		}, Rewritten, 0},
	}
	for _, k := range []int{hashBlock - 1, hashBlock, 2*hashBlock + 17, n - 2} {
		for _, c := range kinds {
			t.Run(fmt.Sprintf("%s at row %d", c.name, k+1), func(t *testing.T) {
				t.Parallel()
				evs, cps := c.tamper(chain("org-1", n), k)
				in := Input{Events: evs, Checkpoints: cps, Keys: keys}
				got, want := Verify(in), verifySequential(in)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("verify = %+v (break %+v); hashing row after row, %+v (break %+v)", got, got.Break, want, want.Break)
				}
				if c.kind == "" {
					if !got.OK || got.Events != n {
						t.Fatalf("verify = %+v (break %+v); want OK over %d", got, got.Break, n)
					}
					return
				}
				if got.OK || got.Break.Kind != c.kind || got.Break.Seq != int64(k+1) {
					t.Fatalf("verify = %+v, break %+v; want %s at %d", got, got.Break, c.kind, k+1)
				}
			})
		}
	}
}

// referenceNormalize is normalizeJSON as encoding/json states it: the
// document compacted and HTML-escaped, or the document itself when that
// is the same or it is not JSON.
func referenceNormalize(doc []byte) []byte {
	if len(doc) == 0 {
		return doc
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		return doc
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, compact.Bytes())
	if bytes.Equal(out.Bytes(), doc) {
		return doc
	}
	return out.Bytes()
}

var normalizeSeeds = []string{
	``, `{}`, `{"a":1}`, `{"a": 1}`, "{\"a\":1}\n", `{"q":"refund for order 1234"}`,
	`{"q":"a \"quoted\" word","n":[1, 2]}`, `{"q":"back\\"}`, `{"q":"back\\\\"} `, `{"q":"\\" "}`,
	`{"q":"<b>"}`, `{"q":"a&b"}`, "{\"q\":\"\u2028\"}", "{\"q\":\"\u00e2\"}", `{"q":"é ü"}`,
	`not json`, `not json `, `{"a":`, `{"a":"open`, `"a b"`, ` "a b"`, `["a", "b"]`, `["a","b"]`,
	"{\"q\":\"tab\\there\"}", "{\"q\":\"raw\ttab\"}", `{"a":"x"}{"b":"y"}`, `{"a":"x" }`,
}

// TestNormalizeAsEncodingJSON: a document reads as encoding/json would
// write it, the same slice when it is already so (no copy is made of a
// document stored as it came).
func TestNormalizeAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range normalizeSeeds {
		doc := []byte(s)
		got, want := normalizeJSON(doc), referenceNormalize(doc)
		if !bytes.Equal(got, want) {
			t.Errorf("normalizeJSON(%q) = %q, want %q", s, got, want)
		}
		if len(doc) > 0 && bytes.Equal(want, doc) && &got[0] != &doc[0] {
			t.Errorf("normalizeJSON(%q) copied a document already written", s)
		}
	}
}

// FuzzNormalizeAsEncodingJSON is TestNormalizeAsEncodingJSON on any bytes.
func FuzzNormalizeAsEncodingJSON(f *testing.F) {
	for _, s := range normalizeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, want := normalizeJSON(doc), referenceNormalize(doc)
		if !bytes.Equal(got, want) {
			t.Fatalf("normalizeJSON(%q) = %q, want %q", doc, got, want)
		}
	})
}

// BenchmarkNormalize is a read call's policy document, whose texts hold
// spaces, as every event stored is normalized.
func BenchmarkNormalize(b *testing.B) {
	doc := []byte(`{"grants":"allow","request":{"principal":{"agent":"agent-billing","key":"tpk_1",` +
		`"roles":["support"],"team":"billing","tenant":"org-bench","attributes":{}},"tool":{"name":"demo.search_tickets",` +
		`"version":"1.0.0","effect":"read","labels":["tickets"],"sensitive":[]},"arguments":{"query":"refund for order 1234",` +
		`"limit":10},"facts":{},"context":{"time":"2026-12-02T04:00:00Z","weekday":"Wednesday","hour":4,"zone":"UTC",` +
		`"run_cost_cents":0}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if len(normalizeJSON(doc)) != len(doc) {
			b.Fatal("rewritten")
		}
	}
}

// A document holding a raw U+2028 or U+2029 is sealed over the form an
// export writes (encoding/json escapes both), so the event read back
// from an export digests as it did in the store. The fast path once took
// such a document for written (bytes.IndexAny compares whole characters,
// not the lone byte 0xe2), and an export of it did not verify.
func TestLineSeparatorsDigestAsExported(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"{\"note\":\"line\u2028break\"}", "[\"\u2029\"]", "{\"a\":\"x\u2028y\u2029z\"}"} {
		e := event("org-1", 1)
		e.Arguments = json.RawMessage(doc)
		e.PolicyInput = json.RawMessage(doc)
		Normalize(&e) // as either store does before sealing
		stored := Digest(&e)
		line, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		var back toolplane.AuditEvent
		if err := DecodeEvent(line, &back); err != nil {
			t.Fatal(err)
		}
		if got := Digest(&back); !bytes.Equal(got, stored) {
			t.Errorf("%q: the exported event digests as %x, the stored one as %x", doc, got, stored)
		}
	}
}
