package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/rules"
)

// toyBundle is a bundle of the toy language: refunds permitted, payments
// forbidden, with tests that pass.
func toyBundle() map[string]string {
	return map[string]string{
		"refunds.toy": `[
{"id": "refunds", "effect": "permit", "tool": "payments.refund_order"},
{"id": "no-payments", "effect": "forbid", "tool": "payments.pay"}
]`,
		"refunds.tests.json": `[
{"name": "a refund is allowed", "expect": "allow", "rule": "refunds", "request": {"tool": {"name": "payments.refund_order"}}},
{"name": "a payment is refused", "expect": "deny", "rule": "no-payments", "request": {"tool": {"name": "payments.pay"}}}
]`,
		"README.md": "Refund rules.\n",
	}
}

func person(subject string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "tpk_" + subject, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
}

// diffItem matches a line of a page's diff; diffItems answers them of the page's diffs, each as its marker
// and text ("+ line", "- line", "  line").
var diffItem = regexp.MustCompile(`<li class="(added|removed|kept)"><span class="mark" aria-hidden="true">(&#43;|.)</span><span class="vh">[a-z]+: </span>([^<]*)</li>`)

func diffItems(body string) []string {
	var out []string
	for _, m := range diffItem.FindAllStringSubmatch(body, -1) {
		out = append(out, strings.Replace(m[2], "&#43;", "+", 1)+" "+m[3])
	}
	return out
}

// The policy pages show an organization's versions newest first with
// who published, disabled and rolled back each, a version's files, its
// line diff against the version before it, its tests run now (a failing
// one marked FAIL), and never another organization's bundles; the
// navigation and the pages follow the rules service's roles, and a
// rollback from the page is the service's, CSRF-checked.
func TestPolicyPagesShowVersionsDiffsAndTests(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	root := person("root", toolplane.RolePlatformAdmin)

	grace := w.browser()
	grace.signIn("grace")
	if p := grace.get("/console/policy"); p.status != http.StatusOK || !strings.Contains(p.body, "toolplane policy publish DIR") {
		t.Fatalf("the empty list does not say how to publish: %d %s", p.status, p.body)
	}

	v1 := toyBundle()
	if _, err := w.rules.Publish(ctx, v1, rules.PublishOptions{Note: "first rules"}, root); err != nil {
		t.Fatal(err)
	}
	v2 := toyBundle()
	v2["refunds.toy"] = strings.Replace(v2["refunds.toy"], `"tool": "payments.pay"`, `"tool": "payments.*pay*"`, 1)
	v2["more.tests.json"] = `[{"name": "a payout is refused", "expect": "deny", "rule": "no-payments", "request": {"tool": {"name": "payments.payout"}}}]`
	delete(v2, "README.md")
	if _, err := w.rules.Publish(ctx, v2, rules.PublishOptions{Note: "<b>wider</b> payments rule"}, root); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rules.Disable(ctx, "break glass: rules misfire", root); err != nil {
		t.Fatal(err)
	}
	// Another organization's bundle, at a version this one has not
	// reached.
	if err := w.store.InsertPolicyBundle(ctx, &toolplane.PolicyBundle{OrganizationID: "org-2", Version: 9, Language: "toy",
		Files: map[string]string{"theirs.toy": `[{"id": "theirs-secret-rule", "effect": "permit"}]`}, Digest: "d",
		PublishedBy: "theirs-admin", PublishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// The rollback, from the page, by a platform_admin.
	admin := w.browser()
	admin.signIn("root")
	page2 := admin.get("/console/policy/2")
	if !strings.Contains(page2.body, "Roll back to v2") {
		t.Fatalf("a platform_admin is not offered the rollback: %s", page2.body)
	}
	if p := admin.post("/console/policy/2/rollback", w.base, url.Values{"note": {"back to v2"}}); p.status != http.StatusForbidden {
		t.Errorf("a rollback without the CSRF token: %d", p.status)
	}
	p := admin.post("/console/policy/2/rollback", w.base, url.Values{"csrf": {page2.csrf(t)}, "note": {"back to v2"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/policy?done=4" {
		t.Fatalf("rollback: %d %s %s", p.status, p.header.Get("Location"), p.body)
	}
	if got, err := w.rules.Show(ctx, 0, root); err != nil || got.Version != 4 || got.Digest != toolplane.PolicyBundleDigest(v2) || got.PublishedBy != "root" {
		t.Fatalf("after the rollback the latest is %+v, %v", got, err)
	}

	// A version stored with a test that fails now (as an engine change
	// would make it): the page runs the tests and marks the failure.
	v5 := toyBundle()
	v5["refunds.tests.json"] = `[{"name": "a refund is allowed", "expect": "allow", "rule": "refunds", "request": {"tool": {"name": "payments.refund_order"}}},
{"name": "a refund is refused", "expect": "deny", "request": {"tool": {"name": "payments.refund_order"}}}]`
	if err := w.store.InsertPolicyBundle(ctx, &toolplane.PolicyBundle{OrganizationID: org, Version: 5, Language: "toy", Files: v5,
		Digest: toolplane.PolicyBundleDigest(v5), PublishedBy: "root", PublishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	list := grace.get("/console/policy")
	if list.status != http.StatusOK {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	for _, want := range []string{`href="/console/policy/5">v5</a>`, "in force", "first rules", "&lt;b&gt;wider&lt;/b&gt; payments rule",
		"break glass: rules misfire", "rules disabled", "back to v2", `same rules as <a href="/console/policy/2">v2</a>`, `data-label="Published by">root`,
		`href="/console/policy" aria-current="page">Policy</a>`} {
		if !strings.Contains(list.body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	if i, j := strings.Index(list.body, "/console/policy/5"), strings.Index(list.body, "/console/policy/1"); i < 0 || j < i {
		t.Errorf("the list is not newest first")
	}

	// Version 2 against version 1: the rule changed line, a file added,
	// one removed, one unchanged.
	p = grace.get("/console/policy/2")
	if p.status != http.StatusOK {
		t.Fatalf("v2: %d %s", p.status, p.body)
	}
	for _, want := range []string{"Changes since", `href="/console/policy/1">v1</a>`, "<code>README.md</code>: removed", "<code>more.tests.json</code>: added",
		"<code>refunds.toy</code>: changed", "Unchanged: <code>refunds.tests.json</code>.", "3 passed, 0 failed", "a payout is refused", "earlier version"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("v2 lacks %q", want)
		}
	}
	items := diffItems(p.body)
	for _, want := range []string{`- Refund rules.`, `+ [{&#34;name&#34;: &#34;a payout is refused&#34;`,
		`- {&#34;id&#34;: &#34;no-payments&#34;, &#34;effect&#34;: &#34;forbid&#34;, &#34;tool&#34;: &#34;payments.pay&#34;}`,
		`+ {&#34;id&#34;: &#34;no-payments&#34;, &#34;effect&#34;: &#34;forbid&#34;, &#34;tool&#34;: &#34;payments.*pay*&#34;}`,
		`  {&#34;id&#34;: &#34;refunds&#34;, &#34;effect&#34;: &#34;permit&#34;, &#34;tool&#34;: &#34;payments.refund_order&#34;},`} {
		if !hasPrefixIn(items, want) {
			t.Errorf("the diff lacks %q: %q", want, items)
		}
	}
	if strings.Contains(p.body, "Roll back") || !strings.Contains(p.body, "Shadow this version") {
		t.Errorf("an auditor is offered a rollback, or not the shadow")
	}

	// The failing test of version 5.
	p = grace.get("/console/policy/5")
	if !strings.Contains(p.body, "1 passed, 1 failed") || !strings.Contains(p.body, `<span class="test-fail">FAIL</span>`) ||
		!strings.Contains(p.body, `<span class="test-pass">pass</span>`) || !strings.Contains(p.body, "a refund is refused") {
		t.Errorf("v5 does not show its failing test: %s", p.body)
	}
	// The disabled version has no tests, and no shadow.
	if p := grace.get("/console/policy/3"); !strings.Contains(p.body, "no rules and no tests") || strings.Contains(p.body, "Shadow this version") {
		t.Errorf("v3: %s", p.body)
	}
	// The first version's diff is all added.
	if p := grace.get("/console/policy/1"); !strings.Contains(p.body, "the first version") || strings.Contains(p.body, `class="removed"`) {
		t.Errorf("v1: %s", p.body)
	}

	// The shadow run, by an auditor: no call was recorded, none differs.
	page2 = grace.get("/console/policy/2")
	p = grace.post("/console/policy/2/shadow", w.base, url.Values{"csrf": {page2.csrf(t)}, "days": {"3"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "Shadow run: the last 3 days") || !strings.Contains(p.body, "decides every replayed call as it was decided") {
		t.Errorf("shadow: %d %s", p.status, p.body)
	}
	if p := grace.post("/console/policy/2/shadow", w.base, url.Values{"csrf": {page2.csrf(t)}, "days": {"365"}}); p.status != http.StatusBadRequest {
		t.Errorf("a shadow of a year: %d", p.status)
	}

	// Another organization's bundle is never shown.
	for _, path := range []string{"/console/policy", "/console/policy/2", "/console/policy/5"} {
		if p := grace.get(path); strings.Contains(p.body, "theirs") {
			t.Errorf("%s shows another organization's bundle", path)
		}
	}
	if p := grace.get("/console/policy/9"); p.status != http.StatusNotFound || strings.Contains(p.body, "theirs") {
		t.Errorf("another organization's version: %d", p.status)
	}

	// The roles: an agent_operator reads, and may not shadow (the audit
	// trail is the auditor's) nor roll back; an approver reads nothing.
	oliver := w.browser()
	oliver.signIn("oliver")
	p = oliver.get("/console/policy/2")
	if p.status != http.StatusOK || strings.Contains(p.body, "Shadow this version") || strings.Contains(p.body, "Roll back") {
		t.Errorf("an agent_operator's v2: %d", p.status)
	}
	if p := oliver.post("/console/policy/2/shadow", w.base, url.Values{"csrf": {p.csrf(t)}, "days": {"3"}}); p.status != http.StatusForbidden {
		t.Errorf("an agent_operator's shadow: %d", p.status)
	}
	if p := oliver.post("/console/policy/1/rollback", w.base, url.Values{"csrf": {p.csrf(t)}}); p.status != http.StatusForbidden {
		t.Errorf("an agent_operator's rollback: %d", p.status)
	}
	ada := w.browser()
	home := ada.signIn("ada")
	if strings.Contains(home.body, `href="/console/policy"`) {
		t.Errorf("an approver's navigation offers the policy section")
	}
	for _, path := range []string{"/console/policy", "/console/policy/2"} {
		if p := ada.get(path); p.status != http.StatusForbidden || strings.Contains(p.body, "refunds.toy") {
			t.Errorf("an approver's %s: %d", path, p.status)
		}
	}
	if v, err := w.rules.Show(ctx, 0, root); err != nil || v.Version != 5 {
		t.Errorf("refused actions changed the bundle: %+v %v", v, err)
	}
}

func hasPrefixIn(items []string, prefix string) bool {
	for _, it := range items {
		if strings.HasPrefix(it, prefix) {
			return true
		}
	}
	return false
}

// The keys page links the person's connected OAuth clients, where the
// authorization server lists and revokes them.
func TestKeysPageLinksConnectedClients(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	root := w.browser()
	root.signIn("root")
	if p := root.get("/console/access/keys"); !strings.Contains(p.body, `<a href="/oauth/consents">your connected clients</a>`) {
		t.Errorf("the keys page does not link the connected clients: %s", p.body)
	}
}
