package boundary_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
)

func TestResultCountAndByteLimitsCompose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        any
		spec      boundary.Spec
		wantCount *int // nil: the answer is not an array
		truncated bool
	}{
		{"neither bound applies", rows(10), boundary.Spec{MaxResults: 20}, ptr(10), false},
		{"max_results equal to the length", rows(10), boundary.Spec{MaxResults: 10}, ptr(10), false},
		{"max_results alone", rows(10), boundary.Spec{MaxResults: 3}, ptr(3), true},
		{"byte bound alone", rows(1000), boundary.Spec{MaxOutputBytes: 4096}, ptr(fitting(rows(1000), 4096)), true},
		{"max_results under the byte bound", rows(1000), boundary.Spec{MaxResults: 5, MaxOutputBytes: 4096}, ptr(5), true},
		{"byte bound under max_results", rows(1000), boundary.Spec{MaxResults: 50, MaxOutputBytes: 1024}, ptr(fitting(rows(50), 1024)), true},
		{"platform limit", rows(5000), boundary.Spec{}, ptr(fitting(rows(5000), boundary.PlatformLimit)), true},
		{"object answers have no count", map[string]any{"rows": rows(1000)}, boundary.Spec{MaxResults: 3, MaxOutputBytes: 2048}, nil, true},
		{"max_results ignores objects", map[string]any{"a": "b"}, boundary.Spec{MaxResults: 1}, nil, false},
		{"scalar answers have no count", "text", boundary.Spec{MaxResults: 1}, nil, false},
		{"empty array", []any{}, boundary.Spec{MaxResults: 1}, ptr(0), false},
		// Found by FuzzBound: "[redacted]" is longer than the secret it
		// replaces, so an answer that fitted can stop fitting.
		{"redaction lengthens past the limit", redactionGrows, boundary.Spec{MaxOutputBytes: boundary.Size(redactionGrows)}, ptr(1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, meta := boundary.Apply(tt.in, tt.spec)
			if meta.Truncated != tt.truncated {
				t.Fatalf("truncated = %v, want %v", meta.Truncated, tt.truncated)
			}
			if !reflect.DeepEqual(meta.Count, tt.wantCount) {
				t.Fatalf("count = %v, want %v", deref(meta.Count), deref(tt.wantCount))
			}
			if rows, ok := data.([]any); ok && len(rows) != *meta.Count {
				t.Fatalf("count %d but data holds %d items", *meta.Count, len(rows))
			}
			if n, limit := boundary.Size(data), boundary.Limit(tt.spec.MaxOutputBytes); n > limit {
				t.Fatalf("data is %d bytes over a limit of %d", n, limit)
			}
		})
	}
}

var redactionGrows = []any{map[string]any{"id": "a", "token": "t"}, map[string]any{"id": "b"}}

func ptr(n int) *int { return &n }

// fitting is the largest number of leading rows whose array encodes within
// limit, the count the byte bound must keep.
func fitting(rows []any, limit int) int {
	n := 0
	for n < len(rows) && boundary.Size(rows[:n+1]) <= limit {
		n++
	}
	return n
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestOneItemLargerThanLimitKeepsShape(t *testing.T) {
	t.Parallel()
	bio := strings.Repeat("lorem ipsum ", 4000) // 48,000 bytes, over the whole limit
	in := []any{
		map[string]any{"id": "p-1", "name": "Ada", "stage": "active", "bio": bio},
		map[string]any{"id": "p-2", "name": "Grace", "stage": "lead", "bio": "short"},
	}
	data, meta := boundary.Apply(in, boundary.Spec{ItemKind: "crm.person"})
	if !meta.Truncated || meta.Count == nil || *meta.Count != 2 {
		t.Fatalf("meta = truncated %v count %v, want truncated with both rows", meta.Truncated, deref(meta.Count))
	}
	first := data.([]any)[0].(map[string]any)
	for _, k := range []string{"id", "name", "stage", "bio"} {
		if _, ok := first[k]; !ok {
			t.Fatalf("row lost key %q: %v", k, first)
		}
	}
	if first["name"] != "Ada" || first["stage"] != "active" {
		t.Fatalf("small fields changed: %v", first)
	}
	want := boundary.Marker(len(bio)+2, &toolplane.ResourceRef{Kind: "crm.person", ID: "p-1"})
	if !reflect.DeepEqual(first["bio"], any(want)) {
		t.Fatalf("bio = %s, want %s", boundary.Encode(nil, first["bio"]), boundary.Encode(nil, want))
	}
	if !reflect.DeepEqual(data.([]any)[1], in[1]) {
		t.Fatalf("second row changed: %v", data.([]any)[1])
	}
}

func TestDroppedMarkerRefOnlyWithItemKindAndID(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 40000)
	tests := []struct {
		name     string
		row      map[string]any
		itemKind string
		wantRef  map[string]any
	}{
		{"kind and string id", map[string]any{"id": "p-1", "body": big}, "crm.person", map[string]any{"kind": "crm.person", "id": "p-1"}},
		{"kind and number id", map[string]any{"id": json.Number("42"), "body": big}, "crm.person", map[string]any{"kind": "crm.person", "id": "42"}},
		{"no item kind", map[string]any{"id": "p-1", "body": big}, "", nil},
		{"no id", map[string]any{"name": "p-1", "body": big}, "crm.person", nil},
		{"empty id", map[string]any{"id": "", "body": big}, "crm.person", nil},
		{"id of another type", map[string]any{"id": true, "body": big}, "crm.person", nil},
		{"id nested elsewhere", map[string]any{"person": map[string]any{"id": "p-1"}, "body": big}, "crm.person", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, _ := boundary.Apply([]any{tt.row}, boundary.Spec{ItemKind: tt.itemKind})
			ms := markers(data)
			if len(ms) != 1 {
				t.Fatalf("want one marker, got %d in %s", len(ms), boundary.Encode(nil, data))
			}
			if got := refOf(ms[0]); !reflect.DeepEqual(got, tt.wantRef) {
				t.Fatalf("ref = %v, want %v", got, tt.wantRef)
			}
		})
	}

	// A scalar item has no id to name.
	data, _ := boundary.Apply([]any{big, "small"}, boundary.Spec{ItemKind: "crm.note"})
	if ms := markers(data); len(ms) != 1 || refOf(ms[0]) != nil {
		t.Fatalf("scalar item: %s", boundary.Encode(nil, data))
	}
}

func TestAttachRefsDoesNotModifyItsInputs(t *testing.T) {
	t.Parallel()
	original := []any{map[string]any{"id": "a", "x": "y"}}
	marker := boundary.Marker(100, nil)
	bounded := []any{map[string]any{"id": "a", "x": marker}}
	named := boundary.AttachRefs(original, bounded, "k")
	if refOf(marker) != nil {
		t.Fatal("AttachRefs modified a marker it was given")
	}
	if refOf(markers(named)[0]) == nil {
		t.Fatal("AttachRefs added no ref")
	}
	if refOf(markers(bounded)[0]) != nil {
		t.Fatal("AttachRefs modified the bounded tree")
	}
}

func TestRedactionBeforeBounding(t *testing.T) {
	t.Parallel()
	pem := "-----BEGIN PRIVATE KEY-----" + strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", 1500) + "-----END PRIVATE KEY-----"
	in := []any{
		// Shrunk in place: the row keeps its keys, so an unredacted token
		// would be read as it is.
		map[string]any{"id": "r-1", "api_key": "sk-live-KEEPME-1", "notes": strings.Repeat("n", 50000)},
		// The credential is the oversized value: bounding first would have
		// left a marker telling its length.
		map[string]any{"id": "r-2", "private_key": pem},
	}
	// Rows cut from the tail.
	for i := range 400 {
		in = append(in, map[string]any{"id": fmt.Sprint("t-", i), "auth": map[string]any{"password": fmt.Sprint("hunter2-tail-", i)}, "pad": strings.Repeat("p", 100)})
	}
	data, meta := boundary.Apply(in, boundary.Spec{ItemKind: "vault.item"})
	if !meta.Truncated {
		t.Fatal("truncated not set")
	}
	out := boundary.Render(toolplane.Result{OK: true, Data: data, Meta: meta})
	for _, secret := range []string{"sk-live-KEEPME", "BEGIN PRIVATE KEY", "hunter2-tail-"} {
		if bytes.Contains(out, []byte(secret)) {
			t.Fatalf("credential %q reached the output", secret)
		}
	}
	rows := data.([]any)
	if got := rows[0].(map[string]any)["api_key"]; got != boundary.Redacted {
		t.Fatalf("api_key = %v, want %q", got, boundary.Redacted)
	}
	if got := rows[1].(map[string]any)["private_key"]; got != boundary.Redacted {
		t.Fatalf("private_key = %v, want %q (redacted, not dropped)", got, boundary.Redacted)
	}
}

func TestBoundTwiceAfterRefs(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("b", 33000)
	in := make([]any, 400)
	for i := range in {
		in[i] = map[string]any{"id": fmt.Sprintf("p-%03d", i), "body": body}
	}
	spec := boundary.Spec{ItemKind: "crm.person"}
	limit := boundary.Limit(spec.MaxOutputBytes)

	// The situation the second pass exists for: the first bound fits, the
	// refs it makes room for do not.
	first, _ := boundary.Bound(in, limit)
	if n := boundary.Size(first); n > limit {
		t.Fatalf("first bound: %d bytes", n)
	}
	if len(first.([]any)) != 400 {
		t.Fatalf("first bound kept %d rows, want all 400 as markers", len(first.([]any)))
	}
	named := boundary.AttachRefs(in, first, spec.ItemKind)
	if n := boundary.Size(named); n <= limit {
		t.Fatalf("refs left the payload at %d bytes, within %d: the case does not exercise the second pass", n, limit)
	}

	data, meta := boundary.Apply(in, spec)
	out := boundary.Render(toolplane.Result{OK: true, Data: data, Meta: meta})
	var rendered struct{ Data json.RawMessage }
	if err := json.Unmarshal(out, &rendered); err != nil {
		t.Fatal(err)
	}
	if len(rendered.Data) > limit {
		t.Fatalf("rendered data is %d bytes over a limit of %d", len(rendered.Data), limit)
	}
	rows := data.([]any)
	if *meta.Count != len(rows) || len(rows) == 0 || len(rows) >= 400 {
		t.Fatalf("count %d, rows %d", *meta.Count, len(rows))
	}
	for i, r := range rows {
		ms := markers(r)
		if len(ms) != 1 {
			t.Fatalf("row %d: %d markers", i, len(ms))
		}
		if ref := refOf(ms[0]); ref["id"] != fmt.Sprintf("p-%03d", i) {
			t.Fatalf("row %d: ref %v", i, ref)
		}
	}
	if again, changed := boundary.Bound(data, limit); changed || !sameValue(again, data) {
		t.Fatal("bounding the final payload again changed it")
	}
}

func TestUntrustedFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		def  toolplane.Definition
		want bool
	}{
		{"internal", toolplane.Definition{Kind: toolplane.KindInternal}, false},
		{"vendor", toolplane.Definition{Kind: toolplane.KindVendor}, true},
		{"mcp", toolplane.Definition{Kind: toolplane.KindMCP}, true},
		{"internal open world", toolplane.Definition{Kind: toolplane.KindInternal, Annotations: toolplane.Annotations{OpenWorld: true}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := boundary.SpecFor(&tt.def)
			if spec.Untrusted != tt.want {
				t.Fatalf("SpecFor untrusted = %v, want %v", spec.Untrusted, tt.want)
			}
			for _, in := range []any{"text", rows(3), strings.Repeat("x", 40000)} {
				if _, meta := boundary.Apply(in, spec); meta.Untrusted != tt.want {
					t.Fatalf("meta.untrusted = %v, want %v", meta.Untrusted, tt.want)
				}
			}
		})
	}
}

func TestSpecFor(t *testing.T) {
	t.Parallel()
	d := &toolplane.Definition{MaxResults: 5, MaxOutputBytes: 1024, ItemKind: "crm.person", Kind: toolplane.KindVendor}
	want := boundary.Spec{MaxResults: 5, MaxOutputBytes: 1024, ItemKind: "crm.person", Untrusted: true}
	if got := boundary.SpecFor(d); !reflect.DeepEqual(got, want) {
		t.Fatalf("SpecFor = %+v, want %+v", got, want)
	}
	if got := boundary.SpecFor(nil); !reflect.DeepEqual(got, boundary.Spec{}) {
		t.Fatalf("SpecFor(nil) = %+v", got)
	}
}

func TestRenderMatchesMeasure(t *testing.T) {
	t.Parallel()
	count := 2
	tests := []struct {
		name string
		r    toolplane.Result
	}{
		{"bounded rows", func() toolplane.Result {
			data, meta := boundary.Apply(rows(5000), boundary.Spec{ItemKind: "crm.person"})
			return toolplane.Result{OK: true, Data: data, Meta: meta}
		}()},
		{"oversized row", func() toolplane.Result {
			data, meta := boundary.Apply([]any{map[string]any{"id": "p-1", "bio": strings.Repeat("<&>", 20000)}}, boundary.Spec{ItemKind: "k"})
			return toolplane.Result{OK: true, Data: data, Meta: meta}
		}()},
		{"failure", toolplane.Result{
			Error: &toolplane.Error{Code: toolplane.CodeInvalidInput, Message: "a <b> & c", Retryable: true, FieldPath: "/x",
				Violations: []toolplane.Violation{{FieldPath: "/x", Constraint: "type", Message: "m"}}},
			Meta: toolplane.Meta{UsageID: "u-1", Replayed: true},
			Stop: toolplane.StopFault,
		}},
		{"everything in meta", toolplane.Result{OK: true, Data: []any{"a", "b"},
			Meta: toolplane.Meta{Count: &count, Truncated: true, Untrusted: true, DeprecationWarning: "use v2"}}},
		{"empty data is not omitted", toolplane.Result{OK: true, Data: map[string]any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := boundary.Render(tt.r)
			if !json.Valid(out) {
				t.Fatalf("Render = %s: not valid JSON", out)
			}
			var got struct {
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if tt.r.Data != nil {
				want := boundary.Encode(nil, tt.r.Data)
				if !bytes.Equal(got.Data, want) {
					t.Fatalf("rendered data differs from Encode")
				}
				if len(got.Data) != boundary.Size(tt.r.Data) {
					t.Fatalf("rendered data is %d bytes, Size says %d", len(got.Data), boundary.Size(tt.r.Data))
				}
				if tt.r.Meta.Truncated && len(got.Data) > boundary.PlatformLimit {
					t.Fatalf("bounded data rendered to %d bytes", len(got.Data))
				}
			}
			// Apart from key order and escaping, the form is the one
			// encoding/json gives toolplane.Result.
			if a, b := tree(t, string(out)), tree(t, string(stdEncode(t, tt.r))); !reflect.DeepEqual(a, b) {
				t.Fatalf("Render = %s\nencoding/json = %s", out, stdEncode(t, tt.r))
			}
			if bytes.Contains(out, []byte("stop")) || bytes.Contains(out, []byte("fault")) {
				t.Fatalf("Render leaked Stop: %s", out)
			}
			if !bytes.HasPrefix(out, []byte(`{"ok":`)) {
				t.Fatalf("Render = %s: ok is not first", out)
			}
		})
	}
}

type contact struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Password string   `json:"password"`
	Tags     []string `json:"tags"`
	Bio      string   `json:"bio,omitempty"`
}

type contacts []contact

func TestApplyMatchesStepByStep(t *testing.T) {
	t.Parallel()
	typed := make([]contact, 3000)
	for i := range typed {
		typed[i] = contact{ID: fmt.Sprint("c-", i), Name: "N\x00ame", Password: "pw", Tags: []string{"a", "b"}}
	}
	typed[2].Bio = strings.Repeat("long ", 10000)
	self := []any{"a", nil}
	self[1] = self
	withOversized := rows(300)
	withOversized[1] = map[string]any{"id": "big", "body": strings.Repeat("x", 40000)}
	withOversized[5] = strings.Repeat("y", 40000)
	tests := []struct {
		name string
		in   any
		spec boundary.Spec
	}{
		{"plain rows", rows(5000), boundary.Spec{ItemKind: "k"}},
		{"plain rows with oversized items", withOversized, boundary.Spec{ItemKind: "k", MaxOutputBytes: 8000}},
		{"typed rows", typed, boundary.Spec{ItemKind: "crm.contact"}},
		{"named slice type", contacts(typed[:50]), boundary.Spec{MaxOutputBytes: 2000}},
		{"array value", [4]contact{typed[0], typed[1], typed[2], typed[3]}, boundary.Spec{ItemKind: "k"}},
		{"max_results then bytes", typed, boundary.Spec{MaxResults: 10, MaxOutputBytes: 600}},
		{"max_results alone", rows(20), boundary.Spec{MaxResults: 7}},
		{"strings", []string{"a", "b\x01", strings.Repeat("c", 50000)}, boundary.Spec{}},
		{"self-containing array", self, boundary.Spec{}},
		{"tiny limit", rows(10), boundary.Spec{MaxOutputBytes: 3}},
		{"object", map[string]any{"rows": rows(1000), "token": "t"}, boundary.Spec{}},
		{"scalar", strings.Repeat("z", 40000), boundary.Spec{}},
		{"bytes", []byte("raw"), boundary.Spec{}},
		{"empty", []contact{}, boundary.Spec{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, meta := boundary.Apply(tt.in, tt.spec)
			want, truncated := stepByStep(tt.in, tt.spec)
			if got, want := boundary.Encode(nil, data), boundary.Encode(nil, want); !bytes.Equal(got, want) {
				t.Fatalf("Apply = %.300s\nstep by step = %.300s", got, want)
			}
			if meta.Truncated != truncated {
				t.Fatalf("truncated = %v, step by step %v", meta.Truncated, truncated)
			}
		})
	}
}
