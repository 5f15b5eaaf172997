package jsondec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// target is a struct a strict pool decodes into.
type target struct {
	A string          `json:"a"`
	N json.Number     `json:"n"`
	R json.RawMessage `json:"r"`
	X any             `json:"x"`
}

var inputs = []string{
	`{"a":"x","n":12.50,"r":{"k":[1,2]},"x":1e400}`,
	`{"a":"x"}` + "\n",
	`{"a":"x"} {"a":"y"}`,
	`{"a":"x"} garbage`,
	`{"a":"x"}]`,
	`{"b":1}`,
	`{"a":1}`,
	`{"a":"x"`,
	``,
	"  \n ",
	`[1,2,3]`,
	`123`,
	`123 `,
	`"s"`,
	`nul`,
	// Cut short by the white space itself: the error names it.
	`nul `,
	`{"a": tru ` + "\n",
	"-\n",
	"\"abc\n",
	`{"x":{"y":[true,false,null,-0.1]}}`,
	"\xff",
	`{"a":"\u00e9\ud800"}`,
}

// fresh decodes in as a new decoder configured by o would.
func fresh(o Options, in io.Reader, v any, only bool) error {
	dec := json.NewDecoder(in)
	if o.UseNumber {
		dec.UseNumber()
	}
	if o.DisallowUnknownFields {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if only {
		if _, err := dec.Token(); err != io.EOF {
			return ErrTrailing
		}
	}
	return nil
}

func text(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestPooledDecodersAnswerAsFreshOnes decodes every input after every
// other with one pool, and compares each answer with a fresh decoder's.
func TestPooledDecodersAnswerAsFreshOnes(t *testing.T) {
	for _, o := range []Options{{UseNumber: true}, {UseNumber: true, DisallowUnknownFields: true}} {
		for _, only := range []bool{false, true} {
			p := New(o)
			for _, first := range inputs {
				for _, in := range inputs {
					for _, s := range []string{first, in} {
						var got, want any = new(target), new(target)
						if !o.DisallowUnknownFields {
							got, want = new(any), new(any)
						}
						var gotErr, wantErr error
						if only {
							gotErr = p.DecodeOnly([]byte(s), got)
						} else {
							gotErr = p.Decode(strings.NewReader(s), got)
						}
						wantErr = fresh(o, strings.NewReader(s), want, only)
						if text(gotErr) != text(wantErr) || !reflect.DeepEqual(got, want) {
							t.Fatalf("%+v only=%v: %q after %q: got %v, %q; want %v, %q", o, only, s, first, got, text(gotErr), want, text(wantErr))
						}
					}
				}
			}
		}
	}
}

// chunked answers its input a few bytes at a time, then err.
type chunked struct {
	b   []byte
	err error
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, c.err
	}
	n := copy(p[:min(len(p), 3)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// TestDecodeReadsAsAFreshDecoderWould checks a reader's error reaches the
// caller as it would through a fresh decoder, and that a decoder that read
// past its value is not handed out again.
func TestDecodeReadsAsAFreshDecoderWould(t *testing.T) {
	p := New(Options{UseNumber: true, DisallowUnknownFields: true})
	tooLarge := errors.New("too large")
	for _, in := range inputs {
		for _, end := range []error{io.EOF, tooLarge} {
			var got, want target
			gotErr := p.Decode(&chunked{[]byte(in), end}, &got)
			wantErr := fresh(Options{UseNumber: true, DisallowUnknownFields: true}, &chunked{[]byte(in), end}, &want, false)
			if text(gotErr) != text(wantErr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%q then %v: got %+v, %q; want %+v, %q", in, end, got, text(gotErr), want, text(wantErr))
			}
		}
	}
}

func ExamplePool_DecodeOnly() {
	p := New(Options{UseNumber: true})
	for _, in := range []string{`{"n":0.1}`, `{"n":1} {}`, `{"n":`} {
		var v any
		err := p.DecodeOnly([]byte(in), &v)
		fmt.Printf("%v %v\n", v, err)
	}
	// Output:
	// map[n:0.1] <nil>
	// map[n:1] invalid character after top-level value
	// <nil> unexpected EOF
}

func BenchmarkDecodeOnly(b *testing.B) {
	p := New(Options{UseNumber: true})
	in := []byte(`{"id":"item_0042"}`)
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := p.DecodeOnly(in, &v); err != nil {
			b.Fatal(err)
		}
	}
}
