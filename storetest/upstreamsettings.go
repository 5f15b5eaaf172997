package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var upstreamSettingCases = []suiteCase{
	{"PutListReplaceDelete", testUpstreamSettings},
	{"RecordedOrNotStored", testUpstreamSettingsRecorded},
}

// settingChange answers a change record of a setting, in org "org".
func settingChange(id, kind string, d time.Duration) *toolplane.Change {
	return &toolplane.Change{ID: id, OrganizationID: "org", Kind: kind, Subject: "mcp.a.send", Actor: "cred-1",
		Detail: []byte(`{"upstream":"a","tool":"send"}`), CreatedAt: at(d)}
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
	for n, i := range []int{2, 0, 1} {
		if err := s.PutUpstreamToolSettingRecorded(ctx, &want[i], settingChange(fmt.Sprint("chg-", n), "put", 0)); err != nil {
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
	if err := s.PutUpstreamToolSettingRecorded(ctx, &want[0], settingChange("chg-3", "put", 0)); err != nil {
		t.Fatal(err)
	}
	check("after replace", want)
	if err := s.DeleteUpstreamToolSettingRecorded(ctx, "a", "zeta", settingChange("chg-4", "reset", 0)); err != nil {
		t.Fatal(err)
	}
	check("after delete", []toolplane.UpstreamToolSetting{want[0], want[2]})
	if err := s.DeleteUpstreamToolSettingRecorded(ctx, "a", "zeta", settingChange("chg-5", "reset", 0)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("delete again = %v; want ErrNotFound", err)
	}
}

// testUpstreamSettingsRecorded: a setting and its change record are stored
// together or not at all. A put or a delete whose record cannot be stored
// (a change ID the organization already has) changes no setting, and a
// delete of a setting that is not there records no change.
func testUpstreamSettingsRecorded(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	first := toolplane.UpstreamToolSetting{Upstream: "a", Tool: "send", Settings: []byte(`{"requires_approval":true}`), UpdatedBy: "cred-1", UpdatedAt: at(0)}
	if err := s.PutUpstreamToolSettingRecorded(ctx, &first, settingChange("chg-1", "put", 0)); err != nil {
		t.Fatal(err)
	}
	changes := func() []toolplane.Change {
		t.Helper()
		got, _, err := s.ListChanges(ctx, "org", "", "", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	settings := func() []toolplane.UpstreamToolSetting {
		t.Helper()
		got, err := s.ListUpstreamToolSettings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := changes(); len(got) != 1 {
		t.Fatalf("a recorded put left %d changes, want 1", len(got))
	} else if d := diff(got[0], *settingChange("chg-1", "put", 0)); d != "" {
		t.Fatalf("the put's record: %s", d)
	}

	tests := []struct {
		name  string
		write func() error
		want  error
	}{
		{"put whose record is a duplicate", func() error {
			next := toolplane.UpstreamToolSetting{Upstream: "a", Tool: "send", Settings: []byte(`{"effect":"send"}`), UpdatedBy: "cred-2", UpdatedAt: at(time.Hour)}
			return s.PutUpstreamToolSettingRecorded(ctx, &next, settingChange("chg-1", "put", time.Hour))
		}, toolplane.ErrExists},
		{"new tool whose record is a duplicate", func() error {
			next := toolplane.UpstreamToolSetting{Upstream: "b", Tool: "echo", Settings: []byte(`{}`), UpdatedBy: "cred-2", UpdatedAt: at(time.Hour)}
			return s.PutUpstreamToolSettingRecorded(ctx, &next, settingChange("chg-1", "put", time.Hour))
		}, toolplane.ErrExists},
		{"delete whose record is a duplicate", func() error {
			return s.DeleteUpstreamToolSettingRecorded(ctx, "a", "send", settingChange("chg-1", "reset", time.Hour))
		}, toolplane.ErrExists},
		{"delete of a setting not there", func() error {
			return s.DeleteUpstreamToolSettingRecorded(ctx, "a", "zeta", settingChange("chg-2", "reset", time.Hour))
		}, toolplane.ErrNotFound},
	}
	for _, tt := range tests {
		if err := tt.write(); !errors.Is(err, tt.want) {
			t.Fatalf("%s = %v; want %v", tt.name, err, tt.want)
		}
		got := settings()
		if len(got) != 1 {
			t.Fatalf("%s: %d settings listed, want the first alone", tt.name, len(got))
		}
		if d := diff(got[0], first); d != "" {
			t.Fatalf("%s changed the setting: %s", tt.name, d)
		}
		if got := changes(); len(got) != 1 {
			t.Fatalf("%s: %d changes recorded, want 1", tt.name, len(got))
		}
	}

	if err := s.DeleteUpstreamToolSettingRecorded(ctx, "a", "send", settingChange("chg-3", "reset", time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := settings(); len(got) != 0 {
		t.Fatalf("a recorded delete left %d settings", len(got))
	}
	if got := changes(); len(got) != 2 || got[0].ID != "chg-3" || got[0].Kind != "reset" {
		t.Fatalf("after a recorded delete, changes = %+v; want chg-3 first of 2", got)
	}
}
