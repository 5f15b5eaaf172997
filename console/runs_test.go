package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// The run page ties a run together as its calls made it through the
// invoker: a metered call and its cost against the run's ceiling, an
// approval a person rejected, a write left uncertain, in the order they
// happened. Every page that shows the run's id links it, escaped as one
// path segment; an auditor of another organization is not shown it, and
// an approver reads it from the approval card that links it.
func TestRunPage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const run = "run page/7" // a space and a slash: the link must hold them
	link := "/console/runs/" + url.PathEscape(run)
	if status, body := w.api("POST", "/v1/tools/xss.meter/invoke", w.keys["agent"],
		fmt.Sprintf(`{"arguments":{"account":"a-1","note":"look"},"run_id":%q,"max_cost_cents":500}`, run)); status != http.StatusOK {
		t.Fatalf("the metered call: %d %v", status, body)
	}
	status, filed := w.api("POST", "/v1/tools/xss.pay/invoke", w.keys["agent"],
		fmt.Sprintf(`{"arguments":{"account":%q,"note":"refund"},"run_id":%q,"max_cost_cents":500}`, account, run))
	if status != http.StatusAccepted {
		t.Fatalf("pay: %d %v", status, filed)
	}
	id := filed["approval"].(map[string]any)["id"].(string)
	fin := w.browser()
	fin.signIn("fin")
	if p := fin.decide(id, "reject", "not this account", nil); p.status != http.StatusSeeOther {
		t.Fatalf("reject: %d %s", p.status, p.body)
	}
	if status, body := w.api("POST", "/v1/tools/xss.slow/invoke", w.keys["agent"],
		fmt.Sprintf(`{"arguments":{"account":"a-2","note":"x"},"run_id":%q}`, run)); status != http.StatusOK || !strings.Contains(toJSON(body), "uncertain") {
		t.Fatalf("the slow call: %d %v", status, body)
	}

	grace := w.browser()
	grace.signIn("grace")
	p := grace.get(link)
	if p.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", link, p.status, p.body)
	}
	wantHeaders(t, "the run page", p)
	// The page's words, without its markup.
	body := html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p.body, ""))
	for _, want := range []string{
		"Run " + run, "reconcile it", // the summary
		"Call of xss.meter 1.0.0: ok", "$0.03 by this run's calls", "$0.03 spent of its $5.00 ceiling", // the spend against the ceiling
		"Approval of xss.pay: rejected by fin", "not this account", // the decision, who and why
		"Call of xss.slow 1.0.0: uncertain", "still uncertain", // the uncertain action
		"xss.pay: require_approval", // the policy's decision
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page does not say %q:\n%s", want, p.body)
		}
	}
	// The timeline is in the order things happened.
	order := []string{"Call of xss.meter", "Call of xss.pay", "Approval of xss.pay", "Call of xss.slow"}
	at := -1
	for _, step := range order {
		i := strings.Index(body, step)
		if i < at {
			t.Errorf("%q is out of order on the timeline", step)
		}
		at = i
	}
	if !strings.Contains(p.body, `data-status="uncertain"`) || !strings.Contains(p.body, `href="/console/approvals/`+id+`"`) {
		t.Errorf("the run page is not marked uncertain, or does not link its approval %s", id)
	}
	if strings.Contains(p.body, "<script>alert") || strings.Contains(p.body, "<table") {
		t.Errorf("the page carries markup from outside, or a table: %s", p.body)
	}

	// Every page that shows the run links it.
	for _, page := range []string{"/console/approvals/" + id, "/console/audit", "/console/uncertain"} {
		if got := grace.get(page); got.status != http.StatusOK || !strings.Contains(got.body, `href="`+link+`"`) {
			t.Errorf("%s does not link the run (%s): %d", page, link, got.status)
		}
	}

	eve := w.browser()
	w.mintIn("org-2", "eve", "eve", "auditor")
	eve.signIn("eve")
	other, missing := eve.get(link), grace.get("/console/runs/run-nowhere")
	if other.status != http.StatusNotFound || missing.status != http.StatusNotFound {
		t.Fatalf("another organization's run: %d; a missing run: %d; want 404 for both", other.status, missing.status)
	}
	if strings.Contains(other.body, "xss.") {
		t.Errorf("another organization's auditor was shown the run: %s", other.body)
	}
	if got := fin.get(link); got.status != http.StatusOK || !strings.Contains(got.body, "Timeline") {
		t.Errorf("an approver opening the run its approval card links to: %d", got.status)
	}
}
