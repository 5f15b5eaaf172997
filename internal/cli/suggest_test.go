package cli

import (
	"bytes"
	"strings"
	"testing"
)

// An unknown subcommand is answered with the one meant, by spelling or by
// the name other tools give it (kubectl get, ls), and still exits 2.
func TestUnknownSubcommandsSuggestTheOneMeant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"approvals", "get", "apr_1"}, `unknown command "get" for "toolplane approvals"; did you mean show?`},
		{[]string{"approvals", "describe", "apr_1"}, "did you mean show?"},
		{[]string{"approvals", "shw", "apr_1"}, "did you mean show?"},
		{[]string{"tools", "ls"}, "did you mean list?"},
		{[]string{"audit", "get", "evt_1"}, "did you mean show?"},
	}
	for _, tt := range tests {
		code, _, errOut := runIn(nil, tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	if code, _, errOut := runIn(nil, "approvals", "xyzzy"); code != 2 || strings.Contains(errOut, "did you mean") {
		t.Errorf("nothing near: exit %d %q", code, errOut)
	}
}

// -o field=PATH on a list names a field no item has as an error (exit 1),
// so a script never goes on with nothing; an empty list, or an optional
// field only some items have, is no error.
func TestOutputFieldOfAListNoItemHasIsAnError(t *testing.T) {
	t.Parallel()
	list := []byte(`{"items":[{"id":"k1","label":"a"},{"id":"k2","revoked_at":"2026-01-01T00:00:00Z"}],"next_cursor":""}`)
	tests := []struct {
		field, data, want, wantErr string
	}{
		{"id", string(list), "k1\nk2\n", ""},
		{"revoked_at", string(list), "2026-01-01T00:00:00Z\n", ""},
		{"nope", string(list), "", `no item of the answer has a field "nope"; the items have id, label, revoked_at`},
		{"nope", `{"items":[]}`, "", ""},
		{"nope", `{"id":"k1"}`, "", `the answer has no field "nope"`},
	}
	for _, tt := range tests {
		o := &output{format: "field=" + tt.field, list: "items"}
		if err := o.check(); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := o.print(&out, []byte(tt.data))
		if got := ""; err != nil {
			got = err.Error()
			if got != tt.wantErr {
				t.Errorf("%s of %s: error %q, want %q", tt.field, tt.data, got, tt.wantErr)
			}
		} else if tt.wantErr != "" {
			t.Errorf("%s of %s: no error, want %q", tt.field, tt.data, tt.wantErr)
		}
		if out.String() != tt.want {
			t.Errorf("%s of %s: printed %q, want %q", tt.field, tt.data, out.String(), tt.want)
		}
	}
}
