// Package jsondec decodes JSON with encoding/json's Decoder, reusing
// decoders and their buffers from one call to the next: a Decoder cannot be
// pointed at another reader, and a fresh one allocates itself and its read
// buffer for every value, on paths that decode a small value per request.
//
// A decoder goes back to its pool only once it has decoded a value without
// error and holds nothing it read past that value, so the next caller finds
// it as a fresh one would be, but for the positions errors report: a
// SyntaxError's Offset counts from no particular start, and only its text
// is meaningful.
package jsondec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// ErrTrailing is what DecodeOnly answers when something other than white
// space follows the value.
var ErrTrailing = errors.New("invalid character after top-level value")

// maxKept bounds the input a decoder that is pooled again may have read: a
// decoder's buffer grows to hold the largest value it read, and one grown
// by a rare large value is left to the collector rather than kept.
const maxKept = 64 << 10

// Pool hands out decoders that share one configuration.
type Pool struct {
	useNumber, disallowUnknown bool
	pool                       sync.Pool
}

// Options configures a Pool's decoders as the Decoder methods of the same
// names do.
type Options struct {
	UseNumber             bool
	DisallowUnknownFields bool
}

// New answers a pool of decoders configured by o.
func New(o Options) *Pool {
	return &Pool{useNumber: o.UseNumber, disallowUnknown: o.DisallowUnknownFields}
}

// decoder is a pooled Decoder and the reader it reads through, which is
// pointed at each call's input in turn.
type decoder struct {
	dec *json.Decoder
	src source
	// in is DecodeOnly's input, kept here so reading it allocates
	// nothing.
	in bytes.Reader
}

// source counts what the decoder reads, to tell whether it kept any of it
// unconsumed.
type source struct {
	r io.Reader
	n int64
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	return n, err
}

// fresh answers a decoder over r configured as the pool's, never pooled.
func (p *Pool) fresh(r io.Reader) *json.Decoder {
	dec := json.NewDecoder(r)
	if p.useNumber {
		dec.UseNumber()
	}
	if p.disallowUnknown {
		dec.DisallowUnknownFields()
	}
	return dec
}

func (p *Pool) get(r io.Reader) *decoder {
	d, _ := p.pool.Get().(*decoder)
	if d == nil {
		d = &decoder{}
		d.dec = p.fresh(&d.src)
	}
	d.src.r, d.src.n = r, 0
	return d
}

// put pools d again if the value it decoded from start (its input offset
// before) was all it read.
func (p *Pool) put(d *decoder, start int64) {
	read := d.src.n
	d.src.r = nil
	d.in.Reset(nil)
	if read <= maxKept && d.dec.InputOffset()-start == read {
		p.pool.Put(d)
	}
}

// Decode reads the first JSON value of r into v, answering what the first
// Decode of a json.Decoder over r configured as the pool's would. What
// follows the value is ignored; a reused decoder may read more of it than
// a fresh one would (its buffer has grown), so r must hold nothing that
// another reader needs.
func (p *Pool) Decode(r io.Reader, v any) error {
	d := p.get(r)
	start := d.dec.InputOffset()
	if err := d.dec.Decode(v); err != nil {
		return err
	}
	p.put(d, start)
	return nil
}

// DecodeOnly reads the one JSON value of b into v, answering what the
// first Decode of a json.Decoder over b configured as the pool's would.
// White space may follow the value, and nothing else: anything else
// answers ErrTrailing.
func (p *Pool) DecodeOnly(b []byte, v any) error {
	// White space at the end does not change the value, and without it a
	// decoder that read the value has nothing left over, so it can be
	// pooled.
	trimmed := bytes.TrimRight(b, " \t\r\n")
	d := p.get(nil)
	d.in.Reset(trimmed)
	d.src.r = &d.in
	start := d.dec.InputOffset()
	if err := d.dec.Decode(v); err != nil {
		if len(trimmed) < len(b) {
			// A value cut short by the white space itself ("tru ", a
			// newline in a string) is refused with another text when
			// the white space is gone: the text is the whole input's.
			return p.fresh(bytes.NewReader(b)).Decode(v)
		}
		return err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return ErrTrailing
	}
	p.put(d, start)
	return nil
}
