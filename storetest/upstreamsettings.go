package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var upstreamSettingCases = []suiteCase{
	{"PutListReplaceDelete", testUpstreamSettings},
}

// testUpstreamSettings: a setting is stored as given (time to the
// microsecond, in UTC) and listed by upstream then tool; a second put of
// the same tool replaces it; a delete removes it, and deleting what is not
// there is not found.
func testUpstreamSettings(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	list := func() []toolplane.UpstreamToolSetting {
		t.Helper()
		got, err := s.ListUpstreamToolSettings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("a new store lists %d settings", len(got))
	}
	want := []toolplane.UpstreamToolSetting{
		{Upstream: "a", Tool: "send", Settings: []byte(`{"requires_approval":true}`), UpdatedBy: "cred-1", UpdatedAt: at(0)},
		{Upstream: "a", Tool: "zeta", Settings: []byte(`{"effect":"read"}`), UpdatedBy: "cred-1", UpdatedAt: at(time.Second)},
		{Upstream: "b", Tool: "echo", Settings: []byte(`{}`), UpdatedBy: "cred-2", UpdatedAt: at(2 * time.Second)},
	}
	for _, i := range []int{2, 0, 1} {
		if err := s.PutUpstreamToolSetting(ctx, &want[i]); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want []toolplane.UpstreamToolSetting) {
		t.Helper()
		got := list()
		if len(got) != len(want) {
			t.Fatalf("%s: %d settings listed, want %d", what, len(got), len(want))
		}
		for i := range want {
			if d := diff(got[i], want[i]); d != "" {
				t.Errorf("%s: setting %d: %s", what, i, d)
			}
		}
	}
	check("after put", want)
	want[0] = toolplane.UpstreamToolSetting{Upstream: "a", Tool: "send", Settings: []byte(`{"effect":"send"}`), UpdatedBy: "cred-3", UpdatedAt: at(time.Hour)}
	if err := s.PutUpstreamToolSetting(ctx, &want[0]); err != nil {
		t.Fatal(err)
	}
	check("after replace", want)
	if err := s.DeleteUpstreamToolSetting(ctx, "a", "zeta"); err != nil {
		t.Fatal(err)
	}
	check("after delete", []toolplane.UpstreamToolSetting{want[0], want[2]})
	if err := s.DeleteUpstreamToolSetting(ctx, "a", "zeta"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("delete again = %v; want ErrNotFound", err)
	}
}
