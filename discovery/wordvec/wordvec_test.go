package wordvec

import (
	"math"
	"testing"
)

func unit(v *Vectors, words ...string) []float32 {
	dst := make([]float32, v.Dim())
	for _, w := range words {
		v.Add(dst, w, 1)
	}
	var n float64
	for _, x := range dst {
		n += float64(x) * float64(x)
	}
	n = math.Sqrt(n)
	for i := range dst {
		dst[i] /= float32(n)
	}
	return dst
}

func cos(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestShippedVectors(t *testing.T) {
	t.Parallel()
	v := Default()
	if v.Dim() != 100 || v.Len() < 49000 {
		t.Fatalf("%d words of %d dimensions", v.Len(), v.Dim())
	}
	for _, w := range []string{"refund", "customer", "invoice", "deploy", "reimburse", "chargeback"} {
		if !v.Add(make([]float32, v.Dim()), w, 1) {
			t.Errorf("%q is not in the table", w)
		}
	}
	if v.Add(make([]float32, v.Dim()), "qqqzzzx", 1) {
		t.Error("a word that is not English has a vector")
	}
	// Meaning, not spelling: related words are closer than unrelated.
	cases := []struct{ a, b, c string }{
		{"reimburse", "refund", "pizza"},
		{"shopper", "customer", "volcano"},
		{"delete", "remove", "celebrate"},
		{"vacation", "leave", "compile"},
	}
	for _, c := range cases {
		ab, ac := cos(unit(v, c.a), unit(v, c.b)), cos(unit(v, c.a), unit(v, c.c))
		if ab <= ac+0.15 {
			t.Errorf("%s~%s %.2f, %s~%s %.2f", c.a, c.b, ab, c.a, c.c, ac)
		}
	}
	// A frequent word says less than a rare one.
	if v.weight[v.index["the"]] >= v.weight[v.index["reimburse"]]/10 {
		t.Error("the weighs as much as reimburse")
	}
}

func TestReadRefusesDamage(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{nil, []byte("not gzip"), data[:len(data)/2]} {
		if _, err := Read(bytesReader(b)); err == nil {
			t.Errorf("%d bytes read without error", len(b))
		}
	}
}
