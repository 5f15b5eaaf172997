package console

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// kinds answers "path:kind" of every field of the form, objects' fields
// included, with the marks the page shows (* required, ! sensitive).
func kinds(f *schemaForm) []string {
	var out []string
	for _, ff := range f.flat() {
		s := ff.Path + ":" + ff.Kind
		if ff.Kind == kindList {
			s += "/" + ff.Item
		}
		if ff.Required {
			s += "*"
		}
		if ff.Sensitive {
			s += "!"
		}
		out = append(out, s)
	}
	return out
}

func TestSchemaFormGenerates(t *testing.T) {
	t.Parallel()
	deep := `{"type":"string"}`
	for range maxFormDepth + 2 {
		deep = `{"type":"object","properties":{"d":` + deep + `}}`
	}
	var many strings.Builder
	many.WriteString(`{"type":"object","properties":{`)
	for i := range maxFormFields + 5 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"p%03d":{"type":"string"}`, i)
	}
	many.WriteString(`}}`)
	bigEnum := make([]int, maxEnumOptions+1)
	for i := range bigEnum {
		bigEnum[i] = i
	}
	be, _ := json.Marshal(bigEnum)

	for _, tt := range []struct {
		name, schema string
		want         []string
	}{
		{"scalars, required first", `{"type":"object","required":["b","n"],"properties":{
			"a":{"type":"string"},"b":{"type":"boolean"},"n":{"type":"integer"},"x":{"type":"number"}}}`,
			[]string{"b:boolean*", "n:integer*", "a:string", "x:number"}},
		{"enum and nullable type", `{"type":"object","properties":{"s":{"enum":["open","closed",null,3]},"t":{"type":["string","null"]}}}`,
			[]string{"s:enum", "t:string"}},
		{"sensitive marks, inherited by an object's fields", `{"type":"object","properties":{
			"card":{"type":"object","x-sensitive":true,"properties":{"number":{"type":"string"}}},
			"pin":{"type":"string","x-sensitive":true}}}`,
			[]string{"card:object!", "card.number:string!", "pin:string!"}},
		{"nested object as fieldsets", `{"type":"object","properties":{"to":{"type":"object","required":["city"],"properties":{"city":{"type":"string"},"zip":{"type":"string"}}}}}`,
			[]string{"to:object", "to.city:string*", "to.zip:string"}},
		{"arrays of scalars one per line, others as JSON", `{"type":"object","properties":{
			"ids":{"type":"array","items":{"type":"integer"}},"tags":{"type":"array","items":{"enum":["a","b"]}},
			"rows":{"type":"array","items":{"type":"object"}},"secrets":{"type":"array","items":{"type":"string","x-sensitive":true}}}}`,
			[]string{"ids:list/integer", "rows:json", "secrets:json!", "tags:list/enum"}},
		{"what the form does not render is JSON", `{"type":"object","properties":{
			"r":{"$ref":"#"},"u":{"anyOf":[{"type":"string"},{"type":"integer"}]},"m":{"type":"object","additionalProperties":{"type":"string"}},
			"e":` + `{"enum":` + string(be) + `},"o":{"enum":[{"a":1}]},"x":{"type":["string","integer"]},"z":true}}`,
			[]string{"e:json", "m:json", "o:json", "r:json", "u:json", "x:json", "z:json"}},
		{"JSON standing for something sensitive is sensitive", `{"type":"object","$defs":{"card":{"type":"string","x-sensitive":true}},"properties":{
			"cards":{"type":"array","items":{"type":"object","properties":{"number":{"type":"string","x-sensitive":true}}}},
			"ref":{"$ref":"#/$defs/card"},"plain":{"type":"array","items":{"type":"object"}}}}`,
			[]string{"cards:json!", "plain:json", "ref:json!"}},
		{"a root as JSON with a sensitive member", `{"oneOf":[{"type":"object","properties":{"pin":{"type":"string","x-sensitive":true}}}]}`,
			[]string{"arguments:json*!"}},
		{"deep nesting stops at the bound", deep,
			[]string{"d:object", "d.d:object", "d.d.d:object", "d.d.d.d:object", "d.d.d.d.d:json"}},
		{"a root that is not an object with properties", `{"$ref":"#/$defs/x","$defs":{"x":{"$ref":"#/$defs/x"}}}`, []string{"arguments:json*"}},
		{"a root of no schema", `not json`, []string{"arguments:json*"}},
		{"too many fields", many.String(), []string{"arguments:json*"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := kinds(newSchemaForm(json.RawMessage(tt.schema)))
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("fields = %v\nwant     %v", got, tt.want)
			}
		})
	}
}

// inputs answers the form keys of the form's fields by path.
func inputs(f *schemaForm) map[string]string {
	out := map[string]string{}
	for _, ff := range f.flat() {
		out[ff.Path] = ff.Input
	}
	return out
}

const parseSchema = `{"type":"object","required":["n"],"properties":{
	"n":{"type":"integer"},"x":{"type":"number"},"b":{"type":"boolean"},"s":{"type":"string"},
	"e":{"enum":["low","high",2]},"ids":{"type":"array","items":{"type":"integer"}},"tags":{"type":"array","items":{"enum":["a","b",1]}},
	"raw":{"type":"array","items":{"type":"object"}},"pin":{"type":"string","x-sensitive":true},"pinned":{"type":"integer","x-sensitive":true},
	"to":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"integer"}}}}}`

func TestSchemaFormParses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		sent map[string]string // by path
		want string            // the arguments, or "" when refused
		// errs are "path: message fragment" the refused form shows.
		errs []string
	}{
		{"typed back by the schema", map[string]string{"n": " 3 ", "x": "2.5", "b": "false", "s": "  keep spaces ", "e": "2", "ids": "1\n\n 2 \r\n3", "tags": "a\n1", "raw": `[{"k":1}]`, "pin": "1234", "to.city": "Oslo", "to.zip": "150"},
			`{"b":false,"e":2,"ids":[1,2,3],"n":3,"pin":"1234","raw":[{"k":1}],"s":"  keep spaces ","tags":["a",1],"to":{"city":"Oslo","zip":150},"x":2.5}`, nil},
		{"empty fields are left out, an empty object too", map[string]string{"n": "-7", "s": "   ", "to.city": "", "ids": "\n"}, `{"n":-7}`, nil},
		{"nothing at all", map[string]string{}, `{}`, nil},
		{"a number keeps its digits", map[string]string{"x": "1e400"}, "", []string{"x: a number is needed"}},
		{"not a whole number", map[string]string{"n": "3.5", "x": "0x10", "b": "yes", "e": "9", "ids": "1\nten", "tags": "c", "raw": "[{", "pin": "oops"},
			"", []string{"n: a whole number is needed", "x: a number is needed", "b: true or false", "e: choose one of the values", "ids: line 2: a whole number", "tags: line 1: one of the values allowed is needed; \"c\" is not one", "raw: this is not valid JSON"}},
		{"an integer past int64", map[string]string{"n": "9223372036854775808"}, "", []string{"n: a whole number is needed"}},
		{"a sensitive field's error does not quote it", map[string]string{"pinned": "hunter2hunter2", "n": "1"}, "", []string{"pinned: a whole number is needed, such as 42"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newSchemaForm(json.RawMessage(parseSchema))
			in := inputs(f)
			vals := url.Values{}
			for p, v := range tt.sent {
				vals.Set(in[p], v)
			}
			got, ok := f.parse(vals)
			if tt.want != "" {
				if !ok {
					t.Fatalf("refused: %v", fieldErrors(f))
				}
				var a, b any
				if err := json.Unmarshal(got, &a); err != nil {
					t.Fatalf("%s: %v", got, err)
				}
				_ = json.Unmarshal([]byte(tt.want), &b)
				if ga, _ := json.Marshal(a); string(ga) != tt.want {
					t.Errorf("arguments = %s\nwant        %s", ga, tt.want)
				}
				return
			}
			if ok {
				t.Fatalf("accepted as %s", got)
			}
			errs := strings.Join(fieldErrors(f), "\n")
			if strings.Contains(errs, "hunter2") {
				t.Errorf("an error quotes a sensitive value: %s", errs)
			}
			for _, e := range tt.errs {
				if !strings.Contains(errs, e) {
					t.Errorf("errors %q lack %q", errs, e)
				}
			}
			// What was typed stays in the form, but the sensitive field's.
			for _, ff := range f.flat() {
				sent := tt.sent[ff.Path]
				switch {
				case ff.Sensitive && ff.Value != "":
					t.Errorf("sensitive %s keeps %q", ff.Path, ff.Value)
				case !ff.Sensitive && ff.Kind != kindObject && strings.TrimSpace(ff.Value) != strings.TrimSpace(sent):
					t.Errorf("%s shows %q, typed %q", ff.Path, ff.Value, sent)
				}
			}
		})
	}
}

func fieldErrors(f *schemaForm) []string {
	var out []string
	for _, ff := range f.flat() {
		if ff.Error != "" {
			out = append(out, ff.Path+": "+ff.Error)
		}
	}
	return out
}

// TestSchemaFormRootJSON: a schema the form cannot render takes the whole
// arguments as one JSON object, and nothing else.
func TestSchemaFormRootJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sent, want string
		ok         bool
	}{
		{` {"a":[1,2]} `, `{"a":[1,2]}`, true},
		{"", `{}`, true},
		{`[1]`, "", false},
		{`{"a":`, "", false},
	} {
		f := newSchemaForm(json.RawMessage(`{"oneOf":[{"type":"object"}]}`))
		got, ok := f.parse(url.Values{f.Root.Input: {tt.sent}})
		if ok != tt.ok || (ok && string(got) != tt.want) {
			t.Errorf("%q: %s, %v; want %s, %v", tt.sent, got, ok, tt.want, tt.ok)
		}
		if !ok && f.Root.Error == "" {
			t.Errorf("%q: refused without a message", tt.sent)
		}
	}
}

// FuzzSchemaForm: no schema makes the generator panic or grow past its
// bounds, and whatever a form is sent, the parser answers either valid
// JSON of an object or a refusal that names the field at fault.
func FuzzSchemaForm(f *testing.F) {
	f.Add(parseSchema, "f0", "3", "f5", "1\n2")
	f.Add(`{"$ref":"#"}`, "f0", `{"a":1}`, "", "")
	f.Add(`{"type":"object","properties":{"a":{"type":"object","properties":{"a":{"$ref":"#"}}}}}`, "f1", "x", "f0", "")
	f.Add(`{"type":"object","properties":{"e":{"enum":[1,"a",null,true]}}}`, "f0", "2", "f0", "-1")
	f.Add(`{"type":["object","null"],"properties":{"n":{"type":["number","null"]}}}`, "f0", "1e999", "f0", "NaN")
	f.Fuzz(func(t *testing.T, schema, k1, v1, k2, v2 string) {
		form := newSchemaForm(json.RawMessage(schema))
		all := form.flat()
		if len(all) > maxFormFields+1 {
			t.Fatalf("%d fields, bound %d", len(all), maxFormFields)
		}
		for _, ff := range all {
			if strings.Count(ff.Path, ".") > maxFormDepth {
				t.Fatalf("field %q past the depth bound", ff.Path)
			}
		}
		got, ok := form.parse(url.Values{k1: {v1}, k2: {v2}})
		if !ok {
			if len(fieldErrors(form)) == 0 {
				t.Fatalf("refused without naming a field")
			}
			checkForgotten(t, form, v1, v2)
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(got, &obj); err != nil {
			t.Fatalf("arguments %q are not a JSON object: %v", got, err)
		}
		checkForgotten(t, form, v1, v2)
	})
}

// BenchmarkSchemaForm measures what a Try page spends on its form: the
// generation from a schema, and the parse of a sent form; "hostile" is a
// schema nested 2,000 deep beside an enum of 100,000 values.
func BenchmarkSchemaForm(b *testing.B) {
	nested := strings.Repeat(`{"type":"object","properties":{"d":`, 2000) + `{"type":"string"}` + strings.Repeat(`}}`, 2000)
	enum := make([]int, 100000)
	for i := range enum {
		enum[i] = i
	}
	e, _ := json.Marshal(enum)
	hostile := `{"type":"object","properties":{"deep":` + nested + `,"e":{"enum":` + string(e) + `}}}`
	for _, bb := range []struct{ name, schema string }{{"typical", parseSchema}, {"hostile", hostile}} {
		b.Run("generate/"+bb.name, func(b *testing.B) {
			raw := json.RawMessage(bb.schema)
			b.ReportAllocs()
			for b.Loop() {
				newSchemaForm(raw)
			}
		})
	}
	b.Run("parse/typical", func(b *testing.B) {
		f := newSchemaForm(json.RawMessage(parseSchema))
		in := inputs(f)
		vals := url.Values{}
		for p, v := range map[string]string{"n": "3", "x": "2.5", "b": "true", "s": "text", "e": "1", "ids": "1\n2\n3", "tags": "a\nb", "to.city": "Oslo", "to.zip": "150"} {
			vals.Set(in[p], v)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := f.parse(vals); !ok {
				b.Fatal("refused")
			}
		}
	})
}

// TestSchemaFormRefusedAt: the invoker's field_path marks the field the
// person typed it in, through nested objects, and nothing when the form
// holds no such field.
func TestSchemaFormRefusedAt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ pointer, want string }{
		{"/n", "n"},
		{"/to/zip", "to.zip"},
		{"/ids/2", "ids"},
		{"/to", ""},
		{"/nowhere/x", ""},
		{"", ""},
	} {
		f := newSchemaForm(json.RawMessage(parseSchema))
		f.refusedAt(tt.pointer, "too small")
		var got []string
		for _, ff := range f.flat() {
			if ff.Error != "" {
				got = append(got, ff.Path)
			}
		}
		if strings.Join(got, ",") != tt.want {
			t.Errorf("%q marks %v, want %q", tt.pointer, got, tt.want)
		}
	}
}

// checkForgotten fails the fuzz run when a sensitive field keeps what was
// typed in it, in its value or in its error's words.
func checkForgotten(t *testing.T, form *schemaForm, typed ...string) {
	t.Helper()
	for _, ff := range form.flat() {
		if !ff.Sensitive {
			continue
		}
		if ff.Value != "" {
			t.Fatalf("sensitive %s keeps what was typed", ff.Path)
		}
		for _, v := range typed {
			// What an error quotes, it quotes so (scalar).
			if v = strings.TrimSpace(v); v != "" && strings.Contains(ff.Error, fmt.Sprintf("%q", v)) {
				t.Fatalf("sensitive %s's error %q quotes %q", ff.Path, ff.Error, v)
			}
		}
	}
}
