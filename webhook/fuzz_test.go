package webhook_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/webhook"
)

// FuzzParseSignature: any header either parses into 32-byte MACs, at most
// sixteen, each the decoding of a v1 entry it holds, or is refused as
// malformed; it never panics.
func FuzzParseSignature(f *testing.F) {
	f.Add(webhook.Sign([]byte("k"), 1, []byte("b")))
	f.Add("v1=" + strings.Repeat("ab", 32) + ", v1=" + strings.Repeat("cd", 32))
	f.Add("v2=x,v1=" + strings.Repeat("00", 32))
	f.Add("")
	f.Add(",")
	f.Add("v1=")
	f.Add("=v1")
	f.Fuzz(func(t *testing.T, header string) {
		macs, err := webhook.ParseSignature(header)
		if err != nil {
			if !errors.Is(err, webhook.ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if len(macs) == 0 || len(macs) > 16 {
			t.Fatalf("%d MACs", len(macs))
		}
		for _, m := range macs {
			if len(m) != 32 || !strings.Contains(strings.ToLower(header), hex.EncodeToString(m)) {
				t.Fatalf("MAC %x is not a v1 entry of %q", m, header)
			}
		}
	})
}
