package console

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// A tool's Try page asks for its arguments with a form generated from the
// tool's input JSON Schema. The schema is the tool author's, so it is read
// as hostile input: the walk is bounded in depth, in fields and in enum
// size, never follows a $ref (a loop would never end), and whatever it
// cannot render as plain inputs becomes a raw-JSON textarea rather than a
// refusal or a panic. The invoker validates the arguments the form gives
// anyway: the form only spares a person typing JSON.

// The bounds of a generated form.
const (
	// maxFormDepth is how deep objects nest as fieldsets; a deeper object
	// is a raw-JSON field.
	maxFormDepth = 5
	// maxFormFields is how many fields one form holds; past it the rest
	// of an object is a raw-JSON field.
	maxFormFields = 120
	// maxEnumOptions is the most options a select offers; a larger enum
	// is typed (and checked against the enum when sent).
	maxEnumOptions = 100
	// maxFormLines is the most lines an array's textarea gives.
	maxFormLines = 1000
	// maxFieldText bounds a label or description shown.
	maxFieldText = 300
)

// The kinds of form field.
const (
	kindString  = "string"
	kindNumber  = "number"
	kindInteger = "integer"
	kindBoolean = "boolean"
	kindEnum    = "enum"
	kindList    = "list" // an array of scalars, one per line
	kindObject  = "object"
	kindJSON    = "json" // anything else, as JSON text
)

// formField is one field of a generated form: a scalar input, a list, a
// fieldset of an object's fields, or a raw-JSON textarea.
type formField struct {
	// Input is the form key the field is sent under ("f0", "f1", ...),
	// numbered in the order the walk meets the fields: property names
	// are the schema's and may hold anything, a number never needs
	// escaping.
	Input string
	// Name is the property's name (the argument's key); Path its
	// location in the arguments, "customer.address.city", for messages.
	Name, Path string
	// Kind is one of the kinds above; Item the kind of a list's items
	// (string, number, integer, boolean, or enum of Options).
	Kind, Item string
	// Required and Sensitive are what the schema says; a field of a
	// sensitive object is sensitive too. A sensitive field is a password
	// input and is never filled in again.
	Required, Sensitive bool
	Description         string
	// Options are an enum's values as JSON (Labels as a person reads
	// them: a string without its quotes).
	Options, Labels []string
	// Why says, for a raw-JSON field, why it is not a plain input.
	Why string
	// Fields are an object's fields.
	Fields []*formField
	// Value is what the person typed (an enum's option index); Error
	// what is wrong with it. Neither is kept for a sensitive field.
	Value, Error string
	// schema is the field's own schema.
	schema map[string]any
}

// InputType is the type of a scalar field's input: a sensitive one's is
// a password's. A number is a text input (with a numeric keyboard, see
// Numeric): the parser types it, and says what is wrong in its words.
func (f *formField) InputType() string {
	if f.Sensitive {
		return "password"
	}
	return "text"
}

// Numeric reports whether the field takes a number, for the keyboard a
// phone shows.
func (f *formField) Numeric() string {
	switch f.Kind {
	case kindInteger:
		return "numeric"
	case kindNumber:
		return "decimal"
	}
	return ""
}

// Selected reports whether option i of an enum or a boolean is what the
// person chose.
func (f *formField) Selected(v string) bool { return f.Value == v }

// schemaForm is a generated form: its fields (Root set instead when the
// schema's root is not an object the generator renders).
type schemaForm struct {
	Fields []*formField
	// Root, when set, is one raw-JSON field standing for the whole
	// arguments object.
	Root *formField
	// n numbers the fields; over is set when the schema holds more than
	// maxFormFields.
	n    int
	over bool
}

// newSchemaForm generates the form of an input schema (JSON text). It
// never fails: a schema it cannot read is one raw-JSON field.
func newSchemaForm(raw json.RawMessage) *schemaForm {
	f := &schemaForm{}
	var root any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &root); err != nil {
			root = nil
		}
	}
	m, _ := root.(map[string]any)
	// A value typed as JSON is one text: when the part of the schema it
	// stands for marks anything sensitive (or refers where something may
	// be), the whole text is, and is never shown again.
	anywhere := marks(root)
	asJSON := func(why string) *schemaForm {
		return &schemaForm{Root: &formField{Input: "f0", Name: "arguments", Path: "arguments", Kind: kindJSON, Required: true,
			Why: why, Description: "The arguments as one JSON object.", Sensitive: anywhere}}
	}
	if why := plainObject(m); why != "" {
		return asJSON(why)
	}
	f.Fields = f.object(m, "", 0, false)
	if f.over {
		return asJSON(fmt.Sprintf("the schema asks for more than %d fields", maxFormFields))
	}
	for _, ff := range f.flat() {
		if ff.Kind == kindJSON && !ff.Sensitive {
			ff.Sensitive = marks(ff.schema) || (anywhere && refers(ff.schema))
		}
	}
	return f
}

// The bounds of the walks over a schema for its marks.
const (
	maxMarkDepth = 64
	maxMarkNodes = 20000
)

// marks reports whether the schema v marks a value x-sensitive anywhere,
// its definitions included.
func marks(v any) bool {
	return walkSchema(v, func(m map[string]any) bool { return flag(m, "x-sensitive") })
}

// refers reports whether the schema v holds a $ref anywhere.
func refers(v any) bool {
	return walkSchema(v, func(m map[string]any) bool { _, ok := m["$ref"]; return ok })
}

// walkSchema reports whether hit holds for an object of v, walked to a
// bounded depth and size; past them it answers true, the careful answer.
func walkSchema(v any, hit func(map[string]any) bool) bool {
	nodes := 0
	var walk func(v any, depth int) bool
	walk = func(v any, depth int) bool {
		nodes++
		if depth > maxMarkDepth || nodes > maxMarkNodes {
			return true
		}
		switch x := v.(type) {
		case map[string]any:
			if hit(x) {
				return true
			}
			for _, sub := range x {
				if walk(sub, depth+1) {
					return true
				}
			}
		case []any:
			for _, sub := range x {
				if walk(sub, depth+1) {
					return true
				}
			}
		}
		return false
	}
	return walk(v, 0)
}

// next answers the next field's input key.
func (f *schemaForm) next() string {
	k := "f" + strconv.Itoa(f.n)
	f.n++
	return k
}

// plainObject answers why the schema m is not an object with properties
// the generator renders as fieldsets, or "" when it is.
func plainObject(m map[string]any) string {
	switch {
	case m == nil:
		return "the schema is not an object"
	case m["$ref"] != nil:
		return "the schema refers elsewhere ($ref)"
	case m["allOf"] != nil || m["anyOf"] != nil || m["oneOf"] != nil:
		return "the schema combines others (allOf, anyOf or oneOf)"
	}
	if t, ok := typeOf(m); !ok || t != "object" {
		return "the schema is not of one object type"
	}
	if _, ok := m["properties"].(map[string]any); !ok {
		return "the object names no properties"
	}
	return ""
}

// typeOf answers the one type m declares: "type" a string, or a list of
// one type and "null". A schema that declares none but properties is an
// object.
func typeOf(m map[string]any) (string, bool) {
	switch t := m["type"].(type) {
	case string:
		return t, true
	case []any:
		var one string
		for _, x := range t {
			s, _ := x.(string)
			switch {
			case s == "null":
			case one == "" && s != "":
				one = s
			default:
				return "", false
			}
		}
		return one, one != ""
	case nil:
		if _, ok := m["properties"]; ok {
			return "object", true
		}
		if _, ok := m["enum"]; ok {
			return "enum", true
		}
	}
	return "", false
}

// object answers the fields of object schema m at path, depth deep.
func (f *schemaForm) object(m map[string]any, path string, depth int, sensitive bool) []*formField {
	props, _ := m["properties"].(map[string]any)
	required := map[string]bool{}
	if rs, ok := m["required"].([]any); ok {
		for _, r := range rs {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	// Required fields first, then by name: the same schema is always the
	// same form, so a field's input key is the same when the form is sent.
	slices.SortFunc(names, func(a, b string) int {
		if required[a] != required[b] {
			if required[a] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var out []*formField
	for _, name := range names {
		p := name
		if path != "" {
			p = path + "." + name
		}
		sub, _ := props[name].(map[string]any)
		if f.n >= maxFormFields {
			// Too many to ask one by one: the whole arguments are typed
			// as JSON instead (newSchemaForm).
			f.over = true
			return out
		}
		out = append(out, f.field(sub, name, p, required[name], depth, sensitive))
	}
	return out
}

// field answers the field of property name (schema m) at path.
func (f *schemaForm) field(m map[string]any, name, path string, required bool, depth int, sensitive bool) *formField {
	ff := &formField{Input: f.next(), Name: clip(name), Path: clip(path), Required: required,
		Sensitive: sensitive || flag(m, "x-sensitive"), schema: m}
	if d, ok := m["description"].(string); ok {
		ff.Description = clip(d)
	} else if d, ok := m["title"].(string); ok {
		ff.Description = clip(d)
	}
	if m == nil {
		ff.Kind, ff.Why = kindJSON, "its schema is not an object"
		return ff
	}
	if _, ok := m["$ref"]; ok {
		ff.Kind, ff.Why = kindJSON, "its schema refers elsewhere ($ref)"
		return ff
	}
	if m["allOf"] != nil || m["anyOf"] != nil || m["oneOf"] != nil {
		ff.Kind, ff.Why = kindJSON, "its schema combines others"
		return ff
	}
	if e, ok := m["enum"].([]any); ok {
		if why := ff.enum(e); why != "" {
			ff.Kind, ff.Why = kindJSON, why
		}
		return ff
	}
	t, ok := typeOf(m)
	if !ok {
		ff.Kind, ff.Why = kindJSON, "its schema declares no single type"
		return ff
	}
	switch t {
	case kindString, kindNumber, kindInteger, kindBoolean:
		ff.Kind = t
	case "array":
		ff.list(m)
	case "object":
		if _, ok := m["properties"].(map[string]any); !ok {
			ff.Kind, ff.Why = kindJSON, "an object without named properties"
			return ff
		}
		if depth+1 >= maxFormDepth {
			ff.Kind, ff.Why = kindJSON, "nested too deep for the form"
			return ff
		}
		ff.Kind = kindObject
		ff.Fields = f.object(m, path, depth+1, ff.Sensitive)
	default:
		ff.Kind, ff.Why = kindJSON, "its type is "+clip(t)
	}
	return ff
}

// enum makes ff a select of enum e's values, or answers why it cannot:
// too many values, or a value that is not a scalar.
func (ff *formField) enum(e []any) string {
	if len(e) == 0 {
		return "an empty enum"
	}
	if len(e) > maxEnumOptions {
		return fmt.Sprintf("an enum of %d values (a select offers at most %d); type the value as JSON", len(e), maxEnumOptions)
	}
	for _, v := range e {
		switch v.(type) {
		case string, float64, bool, nil:
		default:
			return "an enum of objects or arrays"
		}
		b, _ := json.Marshal(v)
		ff.Options = append(ff.Options, string(b))
		if s, ok := v.(string); ok {
			ff.Labels = append(ff.Labels, clip(s))
		} else {
			ff.Labels = append(ff.Labels, string(b))
		}
	}
	ff.Kind = kindEnum
	return ""
}

// list makes ff a list of the array schema m's scalar items, one per
// line, or a raw-JSON field when its items are not scalars.
func (ff *formField) list(m map[string]any) {
	items, _ := m["items"].(map[string]any)
	ff.Kind, ff.Why = kindJSON, "an array of objects, arrays or mixed values"
	if items == nil || items["$ref"] != nil {
		return
	}
	if ff.Sensitive || flag(items, "x-sensitive") {
		// A password input holds one line: a sensitive list is typed
		// as a JSON array there.
		ff.Sensitive, ff.Why = true, "a sensitive list, typed as a JSON array"
		return
	}
	if e, ok := items["enum"].([]any); ok {
		probe := &formField{}
		if probe.enum(e) == "" {
			ff.Kind, ff.Item, ff.Options, ff.Labels, ff.Why = kindList, kindEnum, probe.Options, probe.Labels, ""
		}
		return
	}
	if t, ok := typeOf(items); ok && (t == kindString || t == kindNumber || t == kindInteger || t == kindBoolean) {
		ff.Kind, ff.Item, ff.Why = kindList, t, ""
	}
}

func flag(m map[string]any, key string) bool {
	b, _ := m[key].(bool)
	return b
}

// clip bounds a text from the schema that a page shows.
func clip(s string) string {
	if len(s) <= maxFieldText {
		return s
	}
	cut := maxFieldText
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// parse reads the arguments the form's fields were sent in vals, typed by
// the schema ("3" is 3 for an integer), into the arguments object's JSON.
// Each field keeps what was typed (but a sensitive one), and one that
// cannot be read gets its Error; ok is false when one did. An empty field
// is left out: the invoker tells what a required one lacks, as a model is
// told.
func (f *schemaForm) parse(vals url.Values) (json.RawMessage, bool) {
	if f.Root != nil {
		v, present, ok := f.Root.read(vals)
		switch {
		case !ok:
			return nil, false
		case !present:
			return json.RawMessage(`{}`), true
		}
		raw := v.(json.RawMessage)
		if t := strings.TrimSpace(string(raw)); !strings.HasPrefix(t, "{") {
			f.Root.Error = "the arguments are one JSON object, {...}"
			f.Root.forget()
			return nil, false
		}
		return raw, true
	}
	args, ok := readFields(f.Fields, vals)
	if args == nil {
		args = map[string]any{}
	}
	if !ok {
		return nil, false
	}
	out, err := json.Marshal(args)
	if err != nil {
		return nil, false
	}
	return out, true
}

// readFields reads fields into an object; nil when none was filled in.
func readFields(fields []*formField, vals url.Values) (map[string]any, bool) {
	var out map[string]any
	ok := true
	for _, ff := range fields {
		v, present, good := ff.read(vals)
		ok = ok && good
		if present && good {
			if out == nil {
				out = map[string]any{}
			}
			out[ff.Name] = v
		}
	}
	return out, ok
}

// read answers the field's value as sent in vals, whether one was given,
// and false (with Error set) when what was typed is not one.
func (ff *formField) read(vals url.Values) (v any, present, ok bool) {
	if ff.Kind == kindObject {
		m, good := readFields(ff.Fields, vals)
		return m, m != nil, good
	}
	typed := vals.Get(ff.Input)
	ff.Value = typed
	defer ff.forget()
	text := strings.TrimSpace(typed)
	if ff.Kind != kindString && ff.Kind != kindList && ff.Kind != kindJSON {
		typed = text
	}
	if text == "" {
		return nil, false, true
	}
	switch ff.Kind {
	case kindString:
		return typed, true, true
	case kindJSON:
		if !json.Valid([]byte(text)) {
			ff.Error = "this is not valid JSON"
			return nil, true, false
		}
		return json.RawMessage(text), true, true
	case kindList:
		var items []any
		for i, line := range strings.Split(typed, "\n") {
			line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
			if line == "" {
				continue
			}
			if len(items) == maxFormLines {
				ff.Error = fmt.Sprintf("at most %d lines", maxFormLines)
				return nil, true, false
			}
			x, err := scalar(ff.Item, line, ff.Options, !ff.Sensitive)
			if err != "" {
				ff.Error = fmt.Sprintf("line %d: %s", i+1, err)
				return nil, true, false
			}
			items = append(items, x)
		}
		if items == nil {
			return nil, false, true
		}
		return items, true, true
	case kindEnum:
		i, err := strconv.Atoi(text)
		if err != nil || i < 0 || i >= len(ff.Options) {
			ff.Error = "choose one of the values offered"
			return nil, true, false
		}
		return json.RawMessage(ff.Options[i]), true, true
	}
	x, err := scalar(ff.Kind, text, nil, !ff.Sensitive)
	if err != "" {
		ff.Error = err
		return nil, true, false
	}
	return x, true, true
}

// forget drops what a sensitive field was given, so the page shown again
// does not carry it.
func (ff *formField) forget() {
	if ff.Sensitive {
		ff.Value = ""
	}
}

// scalar types s as a value of kind (string, number, integer, boolean,
// or enum of options, JSON texts), or answers what is wrong with it,
// quoting s only when show is set (never for a sensitive field).
func scalar(kind, s string, options []string, show bool) (any, string) {
	got := func(what string) string {
		if !show {
			return what
		}
		return fmt.Sprintf("%s; %q is not one", what, clip(s))
	}
	switch kind {
	case kindString:
		return s, ""
	case kindInteger:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, got("a whole number is needed, such as 42")
		}
		return n, ""
	case kindNumber:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) || !json.Valid([]byte(s)) {
			return nil, got("a number is needed, such as 2.5")
		}
		return json.Number(s), ""
	case kindBoolean:
		switch s {
		case "true":
			return true, ""
		case "false":
			return false, ""
		}
		return nil, "true or false is needed"
	case kindEnum:
		// A line of an enum list is the value as a person reads it: a
		// string's text, another value's JSON.
		for _, o := range options {
			var v any
			if json.Unmarshal([]byte(o), &v) != nil {
				continue
			}
			if str, ok := v.(string); ok && str == s || o == s {
				return v, ""
			}
		}
		return nil, got("one of the values allowed is needed")
	}
	return nil, "this field cannot be read"
}

// flat answers every field of the form, objects' fields included, in
// order.
func (f *schemaForm) flat() []*formField {
	if f.Root != nil {
		return []*formField{f.Root}
	}
	var out []*formField
	var walk func([]*formField)
	walk = func(fs []*formField) {
		for _, ff := range fs {
			out = append(out, ff)
			walk(ff.Fields)
		}
	}
	walk(f.Fields)
	return out
}

// refusedAt marks the field the invoker's refusal names (its field_path,
// a JSON pointer such as "/where/city") with why, so the person finds
// what to change where they typed it. A pointer into a list or a JSON
// field marks that field; one the form does not hold marks nothing.
func (f *schemaForm) refusedAt(pointer, why string) {
	if f.Root != nil {
		f.Root.Error = clip(why)
		return
	}
	var parts []string
	for _, p := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		parts = append(parts, strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~"))
	}
	fields := f.Fields
	for _, name := range parts {
		var at *formField
		for _, ff := range fields {
			if ff.Name == name {
				at = ff
				break
			}
		}
		switch {
		case at == nil:
			return
		case at.Kind != kindObject:
			at.Error = clip(why)
			return
		}
		fields = at.Fields
	}
}
