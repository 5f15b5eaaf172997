package discovery

import (
	"reflect"
	"strings"
	"testing"
)

func TestTerms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []string
	}{
		{"payments.refund_order", []string{"payment", "refund", "order"}},
		{"refundOrder", []string{"refund", "order"}},
		{"listHTTPServers", []string{"list", "http", "server"}},
		{"Issue a refund for the customer's orders", []string{"issu", "refund", "custom", "order"}},
		{"dеlete", []string{"delet"}}, // a Cyrillic е
		{"ＤＥＬＥＴＥ", []string{"delet"}},
		{"notify by e-mail", []string{"notifi", "email"}},
		{"a-b test re-run", []string{"ab", "test", "re", "run"}},
		{"", []string{}},
	}
	for _, c := range cases {
		if got := Terms(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Terms(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	q := strings.Repeat("é", 100_000)
	c := clip(q)
	if len(c) > MaxQueryBytes || len(c) == 0 {
		t.Fatalf("clip kept %d bytes", len(c))
	}
	if !strings.HasPrefix(q, c) || strings.ContainsRune(c, '\uFFFD') {
		t.Fatal("clip cut inside a rune")
	}
}
