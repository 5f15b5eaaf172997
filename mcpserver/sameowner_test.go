package mcpserver

import (
	"testing"

	"github.com/toolplane/toolplane"
)

// TestSameOwnerAsSessionOwner checks that sameOwner answers what comparing
// the two sessionOwner texts answers, for every pair of a set of
// credentials: keys of one and of two organizations, OAuth clients, and
// ids holding the separator.
func TestSameOwnerAsSessionOwner(t *testing.T) {
	t.Parallel()
	creds := []*toolplane.Credential{
		{OrganizationID: "org-1", ID: "k1"},
		{OrganizationID: "org-1", ID: "k2"},
		{OrganizationID: "org-2", ID: "k1"},
		{OrganizationID: "org-1", ID: "k1", Subject: "other"},
		{OrganizationID: "a\x00b", ID: "c"},
		{OrganizationID: "a", ID: "b\x00c"},
		{OrganizationID: "org-1", ID: "t1", ClientID: "cl", Subject: "ada"},
		{OrganizationID: "org-1", ID: "t2", ClientID: "cl", Subject: "ada"},
		{OrganizationID: "org-1", ID: "t3", ClientID: "cl", Subject: "bob"},
		{OrganizationID: "org-1", ID: "cl\x00ada", ClientID: "", Subject: "ada"},
	}
	for _, a := range creds {
		for _, b := range creds {
			if got, want := sameOwner(a, b), sessionOwner(a) == sessionOwner(b); got != want {
				t.Errorf("sameOwner(%+v, %+v) = %v, the texts say %v", a, b, got, want)
			}
		}
	}
}
