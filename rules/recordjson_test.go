package rules

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/policytest"
)

// marshalRecord is what appendRecord must write: encoding/json's text of
// the document.
func marshalRecord(grants string, r *policy.Request) ([]byte, error) {
	return json.Marshal(struct {
		Grants  string         `json:"grants"`
		Request policy.Request `json:"request"`
	}{grants, *r})
}

func TestAppendRecordWritesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	when := time.Date(2026, 12, 2, 10, 30, 0, 120, time.FixedZone("office", -5*3600))
	self := map[string]any{}
	self["self"] = self
	tests := []struct {
		name string
		r    *policy.Request
		// fails: encoding/json refuses the request, and so must
		// appendRecord.
		fails bool
	}{
		{name: "the zero request", r: &policy.Request{}},
		{name: "every field set", r: policytest.FilledRequest()},
		{name: "text to escape", r: &policy.Request{
			Principal: policy.Principal{Agent: `a"b\c`, Key: "<k>", Roles: []string{"r&d", "\u2028", "é"}, Team: "t\x00", Tenant: "\xff",
				Attributes: map[string]any{"<key>": "v\u2029", "tab\t": "\x7f", "": ""}},
			Tool:    policy.Tool{Name: "n", Tags: []string{}, Sensitive: nil, Owner: "o'wner"},
			Context: policy.Context{Time: when, Source: "rest"},
		}},
		{name: "values of every kind", r: &policy.Request{
			Arguments: map[string]any{
				"number": json.Number("12.50"), "float": 0.000001, "big": 1e21, "int": 7, "bool": false, "null": nil,
				"list": []any{"a", json.Number("-3"), []any{}, map[string]any{}, nil}, "texts": []string{"x", "<y>"},
				"nil list": []any(nil), "nil texts": []string(nil), "nil map": map[string]any(nil),
				"typed": map[string]string{"b": "2", "a": "1"}, "nested": map[string]any{"b": map[string]any{"c": []any{true}}, "a": 1},
			},
			Facts:   map[string]any{"z": "last", "a": "first", "M": "upper"},
			Context: policy.Context{Time: when, Hour: 23, Weekday: 6, RunCostCents: math.MaxInt64},
		}},
		{name: "a person", r: &policy.Request{
			User: &policy.Person{ID: "user-sam", Roles: []string{}, Groups: []string{"g"}, Manager: "max", Attributes: map[string]any{"level": json.Number("3")}},
		}},
		{name: "nested past the depth written by hand", r: &policy.Request{Facts: map[string]any{"deep": deep(maxDepth + 5)}}},
		{name: "an invalid number", r: &policy.Request{Arguments: map[string]any{"n": json.Number("12abc")}}, fails: true},
		{name: "a value holding itself", r: &policy.Request{Facts: map[string]any{"loop": self}}, fails: true},
		{name: "a float JSON has no form for", r: &policy.Request{Arguments: map[string]any{"nan": math.NaN()}}, fails: true},
		{name: "a year JSON time cannot hold", r: &policy.Request{Context: policy.Context{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}, fails: true},
		{name: "a year before zero", r: &policy.Request{Context: policy.Context{Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}, fails: true},
		{name: "a zone 24 hours off", r: &policy.Request{Context: policy.Context{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600))}}, fails: true},
		{name: "a zone off by seconds", r: &policy.Request{Context: policy.Context{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("lmt", -(5*3600+17*60+32)))}}},
		{name: "UTC, whole seconds", r: &policy.Request{Context: policy.Context{Time: time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC)}}},
		{name: "year zero, last nanosecond", r: &policy.Request{Context: policy.Context{Time: time.Date(0, 12, 31, 23, 59, 59, 999999999, time.UTC)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, wantErr := marshalRecord("allow", tt.r)
			got, err := appendRecord(nil, "allow", tt.r)
			if (wantErr != nil) != tt.fails || (err != nil) != tt.fails {
				t.Fatalf("appendRecord error %v, encoding/json error %v, want failure %v", err, wantErr, tt.fails)
			}
			if !tt.fails && string(got) != string(want) {
				t.Errorf("appendRecord wrote\n%s\nencoding/json writes\n%s", got, want)
			}
		})
	}
}

// TestAppendRecordMapsEveryField: a field added to policy.Request that
// appendRecord does not write fails here.
func TestAppendRecordMapsEveryField(t *testing.T) {
	t.Parallel()
	policytest.MapsEveryField(t, func(r *policy.Request) ([]byte, error) { return appendRecord(nil, "allow", r) }, bytes.Equal)
}

// deep answers n objects nested in one another.
func deep(n int) any {
	var v any = "bottom"
	for range n {
		v = map[string]any{"in": v}
	}
	return v
}

// FuzzAppendRecord feeds arbitrary text and numbers to the places a
// caller's or a claim's values reach.
func FuzzAppendRecord(f *testing.F) {
	f.Add("agent", "key", "value", "12")
	f.Add("<a>", "\u2028", "\xff\xfe", "1e400")
	f.Add("", "", "\x00\"\\", "-0.5")
	f.Fuzz(func(t *testing.T, agent, key, value, number string) {
		r := &policy.Request{
			Principal: policy.Principal{Agent: agent, Roles: []string{value}, Attributes: map[string]any{key: value, value: []any{key}}},
			Tool:      policy.Tool{Name: value, Tags: []string{key}},
			Arguments: map[string]any{key: json.Number(number), value: map[string]any{agent: value}},
			Context:   policy.Context{Source: key},
		}
		want, wantErr := marshalRecord(agent, r)
		got, err := appendRecord(nil, agent, r)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("appendRecord error %v, encoding/json error %v", err, wantErr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("appendRecord wrote\n%s\nencoding/json writes\n%s", got, want)
		}
	})
}
