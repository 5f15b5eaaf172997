package ceiling_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ceiling"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		want toolplane.RunShape
		// canonical is Format's answer, when not the text itself.
		canonical string
	}{
		{text: "call(exa)", want: call("exa", 0)},
		{text: "call(exa,1)", want: call("exa", 0), canonical: "call(exa)"},
		{text: "call(exa,25)", want: call("exa", 25)},
		{text: " par( call(exa , 3) ,\n call(exa,3) ) ", want: par(call("exa", 3), call("exa", 3)), canonical: "par(call(exa,3),call(exa,3))"},
		{text: "seq(call(exa),branch(call(full-enrich,10),par(call(a.b_c))))",
			want: seq(call("exa", 0), branch(call("full-enrich", 10), par(call("a.b_c", 0))))},
	} {
		t.Run(c.text, func(t *testing.T) {
			t.Parallel()
			got, err := ceiling.Parse(c.text)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Parse = %+v, want %+v", got, c.want)
			}
			canonical := c.canonical
			if canonical == "" {
				canonical = c.text
			}
			if f := ceiling.Format(got); f != canonical {
				t.Errorf("Format = %s, want %s", f, canonical)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("seq(", ceiling.MaxDepth) + "call(exa)" + strings.Repeat(")", ceiling.MaxDepth)
	wide := "par(" + strings.TrimSuffix(strings.Repeat("call(x),", ceiling.MaxNodes), ",") + ")"
	for _, c := range []struct{ text, why string }{
		{"", `"" is not a node`},
		{"call", "want '(' after call"},
		{"call()", "a call names its provider"},
		{"call(exa,0)", "want a fanout of 1 to 10000"},
		{"call(exa,10001)", "want a fanout of 1 to 10000"},
		{"call(exa,-1)", "want a fanout of 1 to 10000"},
		{"call(exa,99999999999999999999)", "want a fanout of 1 to 10000"},
		{"call(exa", "want ')' closing the call"},
		{"call(Exa)", "a call names its provider"},
		{"par()", `"" is not a node`},
		{"par(call(exa)", "want ',' or ')' after a part"},
		{"par(call(exa)) call(exa)", "unexpected text after the shape"},
		{"loop(call(exa))", `"loop" is not a node`},
		{deep, "nests deeper than 16"},
		{wide, "more than 256 nodes"},
		{strings.Repeat(" ", ceiling.MaxShapeText+1), "bytes: at most"},
	} {
		t.Run(c.text[:min(len(c.text), 40)], func(t *testing.T) {
			t.Parallel()
			_, err := ceiling.Parse(c.text)
			var invalid *ceiling.InvalidError
			if !errors.As(err, &invalid) || invalid.Field != "shape" && !strings.HasPrefix(invalid.Field, "shape.") {
				t.Fatalf("Parse = %v, want an *InvalidError at the shape", err)
			}
			if !strings.Contains(err.Error(), c.why) {
				t.Errorf("Parse = %v, want it to say %q", err, c.why)
			}
		})
	}
}

func TestParseLane(t *testing.T) {
	t.Parallel()
	l, err := ceiling.ParseLane("interactive=20:par(call(exa,3),call(exa,3))")
	if err != nil {
		t.Fatal(err)
	}
	want := toolplane.Lane{Name: "interactive", ActiveRuns: 20, Shape: par(call("exa", 3), call("exa", 3))}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("ParseLane = %+v, want %+v", l, want)
	}
	for _, text := range []string{"interactive", "interactive=20", "interactive=x:call(exa)", "interactive=0:call(exa)", "interactive=2:call("} {
		if _, err := ceiling.ParseLane(text); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("ParseLane(%q) = %v, want ErrInvalid", text, err)
		}
	}
}

// FuzzParse holds the text form to its contract on any input: no panic, a
// shape it answers passes CheckShape, stays within MaxNodes and formats to
// text that reads back to the same shape.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"call(exa)", "par(call(exa,3),call(exa,3))", "seq(call(a),branch(call(b,2),par(call(c))))",
		"par(", "call(exa,0)", strings.Repeat("par(", 20)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ceiling.Parse(text)
		if err != nil {
			if !errors.Is(err, toolplane.ErrInvalid) {
				t.Fatalf("Parse(%q) = %v, not of kind ErrInvalid", text, err)
			}
			return
		}
		if err := ceiling.CheckShape(s); err != nil {
			t.Fatalf("Parse(%q) answered a shape CheckShape refuses: %v", text, err)
		}
		back, err := ceiling.Parse(ceiling.Format(s))
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("Parse(Format(%q)) = %+v, %v; want %+v", text, back, err, s)
		}
		if n := ceiling.Calls(s, "exa"); n < 0 || n > int64(ceiling.MaxNodes)*ceiling.MaxFanout {
			t.Fatalf("Calls = %d, out of bounds", n)
		}
	})
}

// FuzzCheckShape holds the validator to its bounds on any JSON a request
// may carry: no panic, and a shape it passes has a bounded count.
func FuzzCheckShape(f *testing.F) {
	for _, s := range []string{`{"kind":"call","provider":"exa","fanout":3}`,
		`{"kind":"parallel","parts":[{"kind":"call","provider":"exa"},{"kind":"sequence","parts":[{"kind":"call","provider":"exa","fanout":9}]}]}`,
		`{"kind":"branch","parts":[]}`, `{"kind":"call","provider":"exa","fanout":-4}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s toolplane.RunShape
		if json.Unmarshal(data, &s) != nil {
			return
		}
		if err := ceiling.CheckShape(s); err != nil {
			if !errors.Is(err, toolplane.ErrInvalid) {
				t.Fatalf("CheckShape = %v, not of kind ErrInvalid", err)
			}
			return
		}
		if n := ceiling.Calls(s, "exa"); n < 0 || n > int64(ceiling.MaxNodes)*ceiling.MaxFanout {
			t.Fatalf("Calls = %d, out of bounds", n)
		}
	})
}
