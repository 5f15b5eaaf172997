package async_test

import (
	"slices"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
)

// A list answers the calls the reader may read: an agent its own, in
// creation order and page by page; an auditor every call of the
// organization; nobody another organization's.
func TestListAnswersWhatTheReaderMayRead(t *testing.T) {
	t.Parallel()
	onEach(t, func(t *testing.T, s toolplane.Store) {
		r := newRig(t, s, async.Config{})
		first := r.submit(t, "crm.read", "org-1", "").Call.ID
		second := r.submit(t, "crm.read", "org-1", "").Call.ID
		r.submit(t, "crm.read", "org-2", "")
		other := agent("org-1")
		other.Subject = "agent-2"
		auditor := &toolplane.Credential{ID: "key-9", OrganizationID: "org-1", Subject: "ada", Kind: toolplane.CredentialPerson, Roles: []string{toolplane.RoleAuditor}}
		stranger := agent("org-2")
		for _, tc := range []struct {
			name  string
			who   *toolplane.Credential
			after string
			limit int
			want  []string
		}{
			{"the agent", agent("org-1"), "", 10, []string{first, second}},
			{"the agent, a page", agent("org-1"), "", 1, []string{first}},
			{"the agent, the next page", agent("org-1"), first, 1, []string{second}},
			{"another agent", other, "", 10, nil},
			{"an auditor", auditor, "", 10, []string{first, second}},
			{"another organization's agent", stranger, "", 10, nil},
		} {
			got, err := r.svc.List(t.Context(), "org-1", tc.who, tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range got {
				ids = append(ids, c.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("%s: listed %v, want %v", tc.name, ids, tc.want)
			}
		}
	})
}
