package boundary_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
)

// AppendRender writes Render's bytes after what dst holds, and leaves
// dst's bytes as they were.
func TestAppendRenderIsRenderAfterDst(t *testing.T) {
	t.Parallel()
	n := 2
	for _, r := range []toolplane.Result{
		{OK: true, Data: map[string]any{"b": json.Number("1"), "a": []any{"x", nil, true}}, Meta: toolplane.Meta{Count: &n, UsageID: "use_1"}},
		toolplane.Fail(toolplane.CodeConflict, "already refunded"),
		{},
	} {
		want := boundary.Render(r)
		got := boundary.AppendRender([]byte("prefix:"), r)
		if !bytes.Equal(got, append([]byte("prefix:"), want...)) {
			t.Errorf("AppendRender = %s, want prefix:%s", got, want)
		}
		if again := boundary.Render(r); !bytes.Equal(again, want) {
			t.Errorf("Render after AppendRender = %s, want %s", again, want)
		}
	}
}
