package server

import (
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

// An HTTP call whose host its connection allows but whose address the
// egress rules refuse (localhost, loopback) answers unavailable telling
// the model, over REST and MCP, only that the destination is not allowed;
// the operator reads the host and the rule in the log and in the call's
// audit event.
func TestEgressRefusalNamesHostAndRuleToTheOperatorOnly(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	r := e.call(t, e.agent, "shop.by_name", map[string]any{"id": "ord_1"}, "run-egress", "")
	if r.code() != string(toolplane.CodeUnavailable) || r.Error.Message != handler.DestinationNotAllowed {
		t.Errorf("REST answer %s, want unavailable saying only that the destination is not allowed", r.raw)
	}
	cs := e.mcpSession(t, e.agent)
	text, isErr := mcpCall(t, cs, "shop.by_name", map[string]any{"id": "ord_1"})
	cs.Close()
	if !isErr || !strings.Contains(text, handler.DestinationNotAllowed) {
		t.Errorf("MCP answer %q", text)
	}
	for _, shown := range []string{r.raw, text} {
		for _, hidden := range []string{"localhost", "127.0.0.1", "loopback"} {
			if strings.Contains(shown, hidden) {
				t.Errorf("the model is shown %q: %s", hidden, shown)
			}
		}
	}
	events := e.waitAudit(t, e.admin, func(evs []toolplane.AuditEvent) bool {
		for _, ev := range evs {
			if ev.RunID == "run-egress" {
				return true
			}
		}
		return false
	})
	var found bool
	for _, ev := range events {
		if ev.RunID != "run-egress" {
			continue
		}
		found = true
		if ev.Outcome != string(toolplane.CodeUnavailable) || !strings.Contains(ev.Reason, "localhost") ||
			!strings.Contains(ev.Reason, "127.0.0.1") || !strings.Contains(ev.Reason, "loopback address") || ev.ConnectionID == "" {
			t.Errorf("audit event %+v: want the host and rule in its reason", ev)
		}
	}
	if !found {
		t.Fatal("no audit event of the refused call")
	}
	e.shutdown(t)
	log := e.log.String()
	var line string
	for l := range strings.SplitSeq(log, "\n") {
		if strings.Contains(l, "destination refused by egress") && strings.Contains(l, "shop.by_name") {
			line = l
			break
		}
	}
	if !strings.Contains(line, `"level":"WARN"`) || !strings.Contains(line, "localhost") || !strings.Contains(line, "loopback address") {
		t.Errorf("the operator's log line of the refusal: %q", line)
	}
}
