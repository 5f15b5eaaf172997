package boundary_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
)

func TestLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want int
	}{
		{0, boundary.PlatformLimit},
		{-5, boundary.PlatformLimit},
		{1, 2},
		{2, 2},
		{4096, 4096},
		{boundary.PlatformLimit, boundary.PlatformLimit},
		{1 << 20, boundary.PlatformLimit},
	}
	for _, tt := range tests {
		if got := boundary.Limit(tt.in); got != tt.want {
			t.Errorf("Limit(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestBoundPanicsBelowMinimum(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 0, -1} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, boundary.ErrLimitTooSmall) {
					t.Errorf("Bound(limit %d) panicked with %v, want ErrLimitTooSmall", limit, err)
				}
			}()
			boundary.Bound("x", limit)
		}()
	}
}

func TestMarker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		bytes int
		ref   *toolplane.ResourceRef
		want  string
	}{
		{"bare", 40960, nil, `{"__dropped__":{"bytes":40960,"reason":"too_large"}}`},
		{"with ref", 7, &toolplane.ResourceRef{Kind: "crm.person", ID: "p-2"},
			`{"__dropped__":{"bytes":7,"reason":"too_large","ref":{"id":"p-2","kind":"crm.person"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := boundary.Marker(tt.bytes, tt.ref)
			if got := string(boundary.Encode(nil, m)); got != tt.want {
				t.Fatalf("Marker = %s, want %s", got, tt.want)
			}
			if !boundary.IsMarker(m) {
				t.Fatal("IsMarker(Marker(...)) = false")
			}
		})
	}
	for _, notMarker := range []string{
		`{"__dropped__":{"bytes":1}}`,
		`{"__dropped__":{"reason":"too_large"},"id":"x"}`,
		`{"__dropped__":"too_large"}`,
		`[{"__dropped__":{"reason":"too_large"}}]`,
	} {
		if boundary.IsMarker(tree(t, notMarker)) {
			t.Errorf("IsMarker(%s) = true", notMarker)
		}
	}
}

func TestUnboundedPayloadUnchanged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    any
		limit int
	}{
		{"rows under the platform limit", rows(100), boundary.PlatformLimit},
		{"exactly at the limit", "abcd", 6},
		{"empty array at two bytes", []any{}, 2},
		{"empty object at two bytes", map[string]any{}, 2},
		{"empty string at two bytes", "", 2},
		{"object", tree(t, `{"a":[1,2,{"b":null}],"c":"d"}`), 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, changed := boundary.Bound(tt.in, tt.limit)
			if changed {
				t.Fatal("Bound reported a change for a payload that fits")
			}
			if !sameValue(got, tt.in) {
				t.Fatal("Bound did not return its input unchanged")
			}
			data, meta := boundary.Apply(tt.in, boundary.Spec{MaxOutputBytes: tt.limit})
			if meta.Truncated {
				t.Fatal("Apply set truncated for a payload that fits")
			}
			if string(boundary.Encode(nil, data)) != string(boundary.Encode(nil, tt.in)) {
				t.Fatal("Apply changed a payload that fits")
			}
		})
	}
}

// sameValue reports whether a and b are the same value, and for containers
// the same container, not a copy.
func sameValue(a, b any) bool {
	switch a.(type) {
	case []any, map[string]any:
		va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
		return va.Type() == vb.Type() && va.Pointer() == vb.Pointer() && va.Len() == vb.Len()
	}
	return reflect.DeepEqual(a, b)
}

func TestBoundRules(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{
			"tail items are cut, first items kept in order",
			`["aaaa","bbbb","cccc","dddd"]`, 22,
			`["aaaa","bbbb","cccc"]`,
		},
		{
			"an oversized scalar element becomes a marker in place",
			`["a","` + long + `","b"]`, 70,
			`["a",{"__dropped__":{"bytes":202,"reason":"too_large"}},"b"]`,
		},
		{
			"an oversized object element keeps its keys",
			`[{"id":"p-1","body":"` + long + `"},{"id":"p-2"}]`, 90,
			`[{"body":{"__dropped__":{"bytes":202,"reason":"too_large"}},"id":"p-1"},{"id":"p-2"}]`,
		},
		{
			"an oversized array element keeps its head",
			`[["aaaa","bbbb","cccc","dddd","eeee","ffff"],"z"]`, 30,
			`[["aaaa","bbbb","cccc"],"z"]`,
		},
		{
			"the largest object values become markers first",
			`{"a":"` + strings.Repeat("a", 60) + `","b":"` + strings.Repeat("b", 80) + `","c":"` + strings.Repeat("c", 70) + `","d":1}`, 200,
			`{"a":"` + strings.Repeat("a", 60) + `","b":{"__dropped__":{"bytes":82,"reason":"too_large"}},"c":{"__dropped__":{"bytes":72,"reason":"too_large"}},"d":1}`,
		},
		{
			"a value smaller than its marker is never replaced",
			`{"a":"` + strings.Repeat("a", 30) + `","b":"` + strings.Repeat("b", 30) + `"}`, 60,
			`{"__dropped__":{"bytes":75,"reason":"too_large"}}`,
		},
		{
			"an element with no room even for a marker ends the array",
			`["a","` + long + `","b"]`, 30,
			`["a"]`,
		},
		{
			"a marker in the input is atomic",
			`[{"__dropped__":{"reason":"too_large","bytes":9,"ref":{"kind":"k","id":"` + long + `"}}},"b"]`, 100,
			`[]`,
		},
		{
			"a marker that fits is kept whole",
			`[{"__dropped__":{"reason":"too_large","bytes":9}},"` + long + `"]`, 110,
			`[{"__dropped__":{"bytes":9,"reason":"too_large"}},{"__dropped__":{"bytes":202,"reason":"too_large"}}]`,
		},
		{
			"a top-level string becomes a marker",
			`"` + long + `"`, 60,
			`{"__dropped__":{"bytes":202,"reason":"too_large"}}`,
		},
		{
			"a top-level object whose keys cannot fit becomes a marker",
			`{"` + long + `":1}`, 100,
			`{"__dropped__":{"bytes":206,"reason":"too_large"}}`,
		},
		{
			"an object that cannot fit nested becomes a marker in its parent",
			`{"k":{"` + long + `":1},"n":2}`, 100,
			`{"k":{"__dropped__":{"bytes":206,"reason":"too_large"}},"n":2}`,
		},
		{
			"a nested array keeps its head",
			`{"tags":` + tags(20) + `}`, 60,
			`{"tags":` + tags(10) + `}`,
		},
		{
			// The tags are first cut to fit on their own; beside the id
			// they still do not fit, and the second step only writes
			// markers.
			"a container shrunk on its own may still become a marker",
			`{"rows":[{"id":1,"tags":` + tags(20) + `}]}`, 100,
			`{"rows":[{"id":1,"tags":{"__dropped__":{"bytes":101,"reason":"too_large"}}}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := tree(t, tt.in)
			before := string(boundary.Encode(nil, in))
			got, changed := boundary.Bound(in, tt.limit)
			enc := boundary.Encode(nil, got)
			if string(enc) != tt.want {
				t.Fatalf("Bound = %s\nwant    %s", enc, tt.want)
			}
			if !changed {
				t.Fatal("Bound reported no change")
			}
			if len(enc) > tt.limit {
				t.Fatalf("Bound answered %d bytes over a limit of %d", len(enc), tt.limit)
			}
			if after := string(boundary.Encode(nil, in)); after != before {
				t.Fatal("Bound modified its input")
			}
		})
	}
}

// tags returns a JSON array of n two-character strings.
func tags(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf(`"%c%c"`, 'a'+i/26, 'a'+i%26)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func TestTinyLimitAnswersEmptyString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    any
		limit int
		want  string
	}{
		{"string", strings.Repeat("x", 100), 10, `""`},
		{"number", json.Number("12345678901234567890"), 5, `""`},
		{"object", map[string]any{"name": strings.Repeat("x", 100)}, 40, `""`},
		{"false at four bytes", false, 4, `""`},
		{"true at three bytes", true, 3, `""`},
		{"null at two bytes", nil, 2, `""`},
		{"a marker given as the answer", boundary.Marker(10, nil), 20, `""`},
		{"array answers empty array", []any{"abc", "def"}, 5, `[]`},
		{"string with room for a marker", strings.Repeat("x", 100), 60, `{"__dropped__":{"bytes":102,"reason":"too_large"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, meta := boundary.Apply(tt.in, boundary.Spec{MaxOutputBytes: tt.limit})
			if got := string(boundary.Encode(nil, data)); got != tt.want {
				t.Fatalf("Apply = %s, want %s", got, tt.want)
			}
			if !meta.Truncated {
				t.Fatal("truncated not set")
			}
		})
	}
}
