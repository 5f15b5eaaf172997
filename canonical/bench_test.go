package canonical

import (
	"encoding/json"
	"strings"
	"testing"
)

// A typical tool-call argument object: strings, integers, a float, a bool, a
// small array and a nested object.
const tenFields = `{
	"query": "weather in Paris",
	"limit": 25,
	"offset": 0,
	"threshold": 0.75,
	"include_archived": false,
	"tags": ["news", "fr", 3],
	"user_id": 123456789012,
	"locale": "fr-FR",
	"options": {"units": "metric", "days": 7},
	"note": "caf\u00e9 <b>"
}`

func BenchmarkHash10Fields(b *testing.B) {
	dec := json.NewDecoder(strings.NewReader(tenFields))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Hash(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHashJSON10Fields(b *testing.B) {
	raw := []byte(tenFields)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HashJSON(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = Key("run-01HZX3", "agent-7", "payments.refund_order", "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
	}
}
