package console_test

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/toolplane/toolplane"
)

// every is each section of the navigation, in its order.
var every = []string{"overview", "approvals", "uncertain", "audit", "catalog", "access", "notifications", "anomalies", "spend", "policy"}

var (
	navBlock = regexp.MustCompile(`(?s)<nav aria-label="Sections">(.*?)</nav>`)
	navLink  = regexp.MustCompile(`<a href="/console/([a-z]+)"[^>]*>[^<]*(?:<span class="count">([^<]+)<span)?`)
)

// navOf answers the sections a page's navigation offers, and the count
// it shows beside each that shows one.
func navOf(t *testing.T, body string) ([]string, map[string]string) {
	t.Helper()
	m := navBlock.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the page has no navigation: %s", body)
	}
	var names []string
	counts := map[string]string{}
	for _, l := range navLink.FindAllStringSubmatch(m[1], -1) {
		names = append(names, l[1])
		if l[2] != "" {
			counts[l[1]] = html.UnescapeString(l[2])
		}
	}
	return names, counts
}

// The navigation offers a person exactly the sections whose pages their
// roles open: each offered section's page answers them, each one left
// out refuses them. Beside a section it counts what waits for them there
// (the approvals they may decide, the open uncertain actions and
// anomalies), of their own organization only.
func TestNavigationOffersWhatTheRolesOpen(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testNavigation(t, newWorldOn(t, backend))
		})
	}
}

func testNavigation(t *testing.T, w *world) {
	w.keys["tess"] = mint(t, w.store, toolplane.CredentialPerson, "tess", []string{toolplane.RoleToolOwner + ":shop"}, nil)
	// Two payments wait for the finance group, one write is uncertain,
	// and each organization has an open anomaly.
	w.file("agent", "run-nav-1", "")
	w.file("agent", "run-nav-2", "")
	call := `{"arguments":{"account":"` + account + `","note":"x"},"run_id":"run-nav-u"}`
	if status, body := w.api("POST", "/v1/tools/xss.slow/invoke", w.keys["agent"], call); status != http.StatusOK {
		t.Fatalf("the slow call: %d %v", status, body)
	}
	w.fileAnomaly(org, "agent-nav")
	w.fileAnomaly(other, "agent-nav")
	w.fileAnomaly(other, "agent-nav-2")

	tests := []struct {
		who    string
		want   []string
		counts map[string]string
	}{
		// fin decides the finance group's approvals and settles writes.
		{"fin", []string{"approvals", "uncertain", "catalog"}, map[string]string{"approvals": "2", "uncertain": "1"}},
		// ada is an approver outside the finance group: nothing is hers.
		{"ada", []string{"approvals", "uncertain", "catalog"}, map[string]string{"uncertain": "1"}},
		// An auditor reads everything and decides no approval.
		{"grace", []string{"overview", "approvals", "uncertain", "audit", "catalog", "access", "notifications", "anomalies", "spend", "policy"},
			map[string]string{"uncertain": "1", "anomalies": "1"}},
		{"oliver", []string{"catalog", "access", "policy"}, map[string]string{}},
		{"tess", []string{"catalog"}, map[string]string{}},
		{"root", every, map[string]string{"approvals": "2", "uncertain": "1", "anomalies": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.who, func(t *testing.T) {
			b := w.browser()
			b.signIn(tt.who)
			p := b.get("/console/catalog")
			if p.status != http.StatusOK {
				t.Fatalf("the catalogue: %d %s", p.status, p.body)
			}
			got, counts := navOf(t, p.body)
			if !slices.Equal(got, tt.want) {
				t.Errorf("the navigation offers %v, want %v", got, tt.want)
			}
			if fmt.Sprint(counts) != fmt.Sprint(tt.counts) {
				t.Errorf("the navigation counts %v, want %v", counts, tt.counts)
			}
			// The services agree: what is offered opens, what is not is
			// refused.
			for _, s := range every {
				status := b.get("/console/" + s).status
				if offered := slices.Contains(got, s); offered != (status == http.StatusOK) {
					t.Errorf("/console/%s answers %d, and the navigation offers it: %v", s, status, offered)
				}
			}
		})
	}
}

// Past its bound a count says so, rather than reading every item.
func TestNavigationCountIsBounded(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			w := newWorldOn(t, backend)
			for i := range 52 {
				w.fileAnomaly(org, fmt.Sprintf("agent-%d", i))
			}
			b := w.browser()
			b.signIn("grace")
			_, counts := navOf(t, b.get("/console/audit").body)
			if counts["anomalies"] != "50+" {
				t.Errorf("52 open anomalies are counted %q, want 50+", counts["anomalies"])
			}
		})
	}
}
