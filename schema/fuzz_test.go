package schema

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FuzzCheck feeds arbitrary argument objects through coercion and
// validation against the refund schema and the ten-field schema. Whatever
// the input: Check never panics, coercion is idempotent, the violations it
// reports are exactly the reference validator's verdict, and the fast path
// never vouches for what the reference refuses.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		tenFieldArgs,
		`{"order_id":" ord_9f8a7c2e1b3d ","amount_cents":"42","reason":"DEFECTIVE","skus":"a","quantity":"007"}`,
		`{"amount_cents":1e400}`, `{"ratio":"-0.0"}`, `[]`, `null`, `{"skus":[" a ",1]}`,
		`{"rate":0.9999999999999999999,"amount_cents":4999999.99999999999}`,
	} {
		f.Add([]byte(seed))
	}
	schemas := []*Schema{mustCompile(f, refundSchema), mustCompile(f, tenFieldSchema)}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, s := range schemas {
			out, _, vs := s.Check(v)
			again, log, _ := s.Check(out)
			a, _ := json.Marshal(out)
			b, _ := json.Marshal(again)
			if !bytes.Equal(a, b) || len(log) != 0 {
				t.Fatalf("coercion not idempotent: %s -> %s (%v)", a, b, log)
			}
			ref := s.compiled.Validate(out) == nil
			if (len(vs) == 0) != ref {
				t.Fatalf("violations %+v disagree with the reference (valid=%v) for %s", vs, ref, a)
			}
			if !ref && len(vs) == 0 {
				t.Fatalf("invalid input with no violation listed: %s", a)
			}
			if s.fast != nil && s.fast.valid(out) && !ref {
				t.Fatalf("fast path vouched for an invalid value: %s", a)
			}
		}
	})
}
