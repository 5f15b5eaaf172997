package sqlstore

import (
	"bytes"
	"errors"
	"testing"
)

// A read call's document as the rules record it (rules.record), taken
// from an audit row of BenchmarkStoragePerCall.
const readDoc = `{"grants":"allow","request":{"principal":{"agent":"agent-1","roles":[],"attributes":{}},"tool":{"name":"crm.get_contact","version":"1.0.0","effect":"read","destructive":false,"read_only":true,"tags":[],"sensitive":[]},"arguments":{"body":"sha256:7170e6742875a9b564e3cf9442a19400","to":"sha256:fc7df777c08a00350a62876ea699ec18"},"facts":{},"context":{"time":"2026-12-06T07:54:06.998273306Z","hour":7,"weekday":0,"run_cost_cents":0,"source":"sdk"}}}`

func TestPackDocumentRoundTrips(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		doc     string
		maxSize int // the packed size at most; 0: no bound
	}{
		{"a read call", readDoc, 170},
		{"a write for a person, with facts", `{"grants":"require_approval","request":{"principal":{"agent":"a","roles":["ops"],"attributes":{"team":"x"}},"user":{"person":"sam","groups":[]},"tool":{"name":"p.refund","version":"2.1.0","effect":"write","destructive":true,"read_only":false,"tags":["finance"],"sensitive":["/to"]},"arguments":{"amount_cents":100,"to":"[redacted]"},"facts":{"org_time":{"hour":3}},"context":{"time":"2026-12-06T07:54:06Z","hour":7,"weekday":0,"run_cost_cents":250,"source":"rest"}}}`, 0},
		{"a digest in upper case stays text", `{"a":"sha256:7170E6742875A9B564E3CF9442A19400"}`, 0},
		{"a digest cut short stays text", `{"a":"sha256:7170e67"}`, 0},
		{"bytes below 0x20, the marker first", "\x1f\x01\x02\x03 \t\n{\"x\":\x00}", 0},
		{"only a fragment", `true`, 0},
		{"not JSON at all", "sha256:sha256:\xff\xfe", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			packed := PackDocument([]byte(tt.doc))
			if packed[0] != docMarker {
				t.Fatalf("packed form %q does not start with the marker", packed)
			}
			got, err := UnpackDocument(packed)
			if err != nil || string(got) != tt.doc {
				t.Fatalf("UnpackDocument(PackDocument(%q)) = %q, %v", tt.doc, got, err)
			}
			if tt.maxSize > 0 && len(packed) > tt.maxSize {
				t.Errorf("packed %d bytes into %d; want at most %d", len(tt.doc), len(packed), tt.maxSize)
			}
		})
	}
}

// A document stored before packing reads back as it was, and an empty
// one packs to nothing (NULL).
func TestUnpackDocumentReadsUnpackedDocuments(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{readDoc, `{}`, ``} {
		got, err := UnpackDocument([]byte(doc))
		if err != nil || string(got) != doc {
			t.Errorf("UnpackDocument(%q) = %q, %v", doc, got, err)
		}
	}
	if p := PackDocument(nil); p != nil {
		t.Errorf("PackDocument(nil) = %q; want nil", p)
	}
}

func TestUnpackDocumentRefusesCorruptForms(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"\x1f\x01", "\x1f\x02abc", "\x1f\x00", "\x1fa\x1f"} {
		if got, err := UnpackDocument([]byte(b)); !errors.Is(err, ErrDocument) {
			t.Errorf("UnpackDocument(%q) = %q, %v; want ErrDocument", b, got, err)
		}
	}
}

func FuzzPackDocument(f *testing.F) {
	f.Add([]byte(readDoc))
	f.Add([]byte("\x1fsha256:0123456789abcdef0123456789abcdef"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := UnpackDocument(PackDocument(doc))
		if err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("round trip of %q = %q, %v", doc, got, err)
		}
	})
}

func BenchmarkPackDocument(b *testing.B) {
	doc := []byte(readDoc)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := UnpackDocument(PackDocument(doc)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(PackDocument(doc))), "B-packed")
}

// packDocumentReference is PackDocument as it was first written, byte by
// byte: the packed form PackDocument must answer.
func packDocumentReference(doc []byte) []byte {
	if len(doc) == 0 {
		return nil
	}
	out := make([]byte, 0, len(doc)/2+16)
	out = append(out, docMarker)
	s := doc
next:
	for i := 0; i < len(s); {
		c := s[i]
		if c == 's' && isDigest(s[i:]) {
			out = append(out, docDigest)
			h := s[i+len(digestPrefix) : i+len(digestPrefix)+32]
			for j := 0; j < 32; j += 2 {
				out = append(out, unhex(h[j])<<4|unhex(h[j+1]))
			}
			i += len(digestPrefix) + 32
			continue
		}
		for _, k := range fragmentsAt[c] {
			if f := docFragments[k]; hasPrefix(s[i:], f) {
				out = append(out, docFragmentBase+k)
				i += len(f)
				continue next
			}
		}
		if c < 0x20 {
			out = append(out, docEscape)
		}
		out = append(out, c)
		i++
	}
	return out
}

// PackDocument answers, byte for byte, the packed form it always did:
// rows stored before and after read back alike, and a row's stored bytes
// do not depend on the build that wrote it.
func TestPackDocumentAsReference(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{readDoc, "", "s", "sha256:", `"`, `""`, `"}}}`, `"}}`, "\x1f\x00 true fals", "tru"} {
		if got, want := PackDocument([]byte(doc)), packDocumentReference([]byte(doc)); !bytes.Equal(got, want) {
			t.Errorf("PackDocument(%q) = %q, want %q", doc, got, want)
		}
	}
}

func FuzzPackDocumentAsReference(f *testing.F) {
	f.Add([]byte(readDoc))
	f.Add([]byte("\x1fsha256:0123456789abcdef0123456789abcdef"))
	f.Add([]byte(`{"grants":"require_approval","request":{"principal":{"agent":"a","roles":["ops"],"attributes":{"team":"x"}},"user":{"person":"sam"}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := PackDocument(doc), packDocumentReference(doc); !bytes.Equal(got, want) {
			t.Fatalf("PackDocument(%q) = %q, want %q", doc, got, want)
		}
	})
}

// BenchmarkPackDocumentOnly is the audit writer's part: packing alone.
func BenchmarkPackDocumentOnly(b *testing.B) {
	doc := []byte(readDoc)
	b.ReportAllocs()
	for b.Loop() {
		PackDocument(doc)
	}
}
