package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/schema"
)

// A schema that doubles the validator's walk at every level is refused at
// registration, naming the bound, on every schema a definition declares.
func TestRegistrationRefusesAnExplodingSchema(t *testing.T) {
	t.Parallel()
	var defs strings.Builder
	defs.WriteString(`"l0":{"type":"string"}`)
	for i := 1; i <= 19; i++ {
		fmt.Fprintf(&defs, `,"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1)
	}
	bomb := json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/l19"}},"$defs":{` + defs.String() + `}}`)
	for _, field := range []string{"input_schema", "output_schema", "error_schema"} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			d := base()
			switch field {
			case "input_schema":
				d.InputSchema = bomb
			case "output_schema":
				d.OutputSchema = bomb
			case "error_schema":
				d.ErrorSchema = bomb
			}
			ps := problems(t, []toolplane.Definition{d}, Options{Bindings: deployment})
			var found bool
			for _, p := range ps {
				if p.Field == field {
					found = true
					if !strings.Contains(p.String(), fmt.Sprint(schema.DefaultLimits.MaxExpanded)) {
						t.Errorf("the refusal does not name the bound: %s", p)
					}
				}
			}
			if !found {
				t.Fatalf("problems %v, want one on %s", ps, field)
			}
		})
	}
}

// A pattern whose program would cost a thousand steps for every byte of an
// argument is refused at registration, naming the pattern and the bound.
func TestRegistrationRefusesAnExpensivePattern(t *testing.T) {
	t.Parallel()
	d := base()
	d.InputSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","pattern":"[a-z]{1000}b"}}}`)
	ps := problems(t, []toolplane.Definition{d}, Options{Bindings: deployment})
	for _, p := range ps {
		if p.Field == "input_schema" {
			if s := p.String(); !strings.Contains(s, "/properties/text/pattern") || !strings.Contains(s, fmt.Sprint(schema.DefaultLimits.MaxPatternProgram)) {
				t.Errorf("the refusal does not name the pattern and the bound: %s", s)
			}
			return
		}
	}
	t.Fatalf("problems %v, want one on input_schema", ps)
}
