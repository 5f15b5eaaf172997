package schema

import (
	"strings"
	"testing"
	"time"
)

// An integer written with a fraction or an exponent reaches the handler
// as plain digits, at fields that take only integers; anything else keeps
// its text.
func TestIntegerFormIsCanonical(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{
		"n":{"type":"integer"},
		"opt":{"type":["integer","null"]},
		"f":{"type":"number"},
		"raw":{"type":"integer","x-coerce":false},
		"list":{"type":"array","items":{"type":"integer"}}}}`)
	tests := []struct {
		in, want string
		logged   bool
	}{
		{`{"n":1e2}`, `{"n":100}`, true},
		{`{"n":100.0}`, `{"n":100}`, true},
		{`{"n":1E+2}`, `{"n":100}`, true},
		{`{"n":-12.50e1}`, `{"n":-125}`, true},
		{`{"n":-0.0}`, `{"n":0}`, true},
		{`{"n":0e999999999}`, `{"n":0}`, true},
		{`{"n":12}`, `{"n":12}`, false},
		{`{"n":1.5}`, `{"n":1.5}`, false},
		{`{"n":1e400}`, `{"n":1e400}`, false},
		{`{"n":15e-1}`, `{"n":15e-1}`, false},
		{`{"opt":2.0}`, `{"opt":2}`, true},
		{`{"f":1e2}`, `{"f":1e2}`, false},
		{`{"raw":1e2}`, `{"raw":1e2}`, false},
		{`{"list":[1,2.0,3e0]}`, `{"list":[1,2,3]}`, true},
	}
	for _, tt := range tests {
		out, log := s.Coerce(decode(t, tt.in))
		if got := encode(t, out); got != tt.want {
			t.Errorf("%s: coerced to %s, want %s", tt.in, got, tt.want)
		}
		if logged := len(log) > 0 && log[0].Rule == RuleIntegerForm; logged != tt.logged {
			t.Errorf("%s: coercions %+v, want integer_form logged=%v", tt.in, log, tt.logged)
		}
	}
}

// A number whose exact value takes the validator long to expand is refused
// before validation, promptly, naming the field.
func TestUnreadableNumbersAreRefused(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer"},"list":{"type":"array","items":{"type":"number","minimum":0}}}}`)
	tests := []struct {
		in, at string
	}{
		{`{"n":1e1000000}`, "/n"},
		{`{"n":1e-1000000}`, "/n"},
		{`{"n":1e99999999999}`, "/n"},
		{`{"list":[1,` + strings.Repeat("1e900000,", 200) + `1]}`, "/list/1"},
		{`{"n":1` + strings.Repeat("0", 500) + `}`, "/n"},
	}
	for _, tt := range tests {
		start := time.Now()
		vs := s.Validate(decode(t, tt.in))
		if took := time.Since(start); took > time.Second {
			t.Errorf("%.40s: took %v", tt.in, took)
		}
		if len(vs) != 1 || vs[0].Constraint != "number" || vs[0].FieldPath != tt.at {
			t.Errorf("%.40s: violations %+v, want one number violation at %s", tt.in, vs, tt.at)
		}
	}
	for _, ok := range []string{`{"n":1e300}`, `{"list":[1.5e308,1e-300]}`} {
		if vs := s.Validate(decode(t, ok)); len(vs) != 0 {
			t.Errorf("%s: %+v", ok, vs)
		}
	}
}
