package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// pagerRef is a value the pager tools' input schema marks x-sensitive:
// neither its name nor its shape looks like a credential, so only the
// schema's mark hides it.
const pagerRef = "zebra-lantern-42"

// sensitiveFixture serves pager.page, which waits for a person's approval,
// and pager.send, which outlives its timeout and so becomes an uncertain
// action; both take a reference the schema marks x-sensitive.
func sensitiveFixture(t *testing.T) *fixture {
	t.Helper()
	store := sqlitetest.New(t)
	hs := handler.NewRegistry()
	var defs []toolplane.Definition
	for _, name := range []string{"pager.page", "pager.send"} {
		d := toolplane.Definition{
			Name: name, Version: "1.0.0", Description: "Page someone.", Kind: toolplane.KindInternal, Effect: toolplane.EffectWrite,
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"ref":{"type":"string","x-sensitive":true}}}`),
			OutputSchema: json.RawMessage(`{"type":"object"}`),
			Binding:      toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: name}}, Repeatable: new(false),
			Timeout: toolplane.Duration(2 * time.Second),
		}
		if name == "pager.page" {
			d.Annotations.RequiresApproval = true
		} else {
			d.Timeout = toolplane.Duration(20 * time.Millisecond)
		}
		b, err := handler.BindFunc(name, func(ctx context.Context, _ handler.Call, _ any) (any, error) {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			return map[string]any{}, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := hs.Register(b); err != nil {
			t.Fatal(err)
		}
		defs = append(defs, d)
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, store, reg, hs, "pager.*")
}

// serve answers a fixture serving reg's tools (their handlers hs) over
// store, through an invoker whose policy is the keys' own tools and whose
// approvals wait an hour, with an agent's key for tools and an approver's.
func serve(t *testing.T, store *sqlite.Store, reg *registry.Registry, hs *handler.Registry, tools ...string) *fixture {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Logger: quiet,
		Approvals: approval.New(approval.Config{Store: store, TTL: time.Hour})})
	if err != nil {
		t.Fatal(err)
	}
	layer := &door.Door{Invoker: iv, Registry: reg, Store: store, Log: quiet}
	api := &httpapi.Server{Door: layer, Store: store, Log: quiet}
	f := &fixture{store: store, door: layer, api: api, srv: httptest.NewServer(api.Handler())}
	t.Cleanup(f.srv.Close)
	f.agent = mint(t, store, toolplane.CredentialAgent, "agent-ops", nil, tools, false)
	f.person = mint(t, store, toolplane.CredentialPerson, "ada", []string{"approver"}, nil, false)
	return f
}

// A value the tool's input schema marks x-sensitive is hidden wherever the
// API shows a call's arguments to a person: an approval, listed or alone,
// and an uncertain action.
func TestSchemaSensitiveValuesAreHiddenFromPeople(t *testing.T) {
	t.Parallel()
	f := sensitiveFixture(t)
	args := `{"arguments":{"to":"oncall","ref":"` + pagerRef + `"},"run_id":"run-1"}`
	status, body := f.do(t, "POST", "/v1/tools/pager.page/invoke", f.agent, args)
	if status != http.StatusAccepted {
		t.Fatalf("page: %d %v", status, body)
	}
	id := body["approval"].(map[string]any)["id"].(string)
	if status, body = f.do(t, "POST", "/v1/tools/pager.send/invoke", f.agent, args); status != http.StatusOK || body["ok"] != false {
		t.Fatalf("send: %d %v; want an uncertain result", status, body)
	}
	for _, path := range []string{"/v1/approvals", "/v1/approvals/" + id, "/v1/uncertain"} {
		status, body := f.do(t, "GET", path, f.person, "")
		shown := toJSON(body)
		if status != http.StatusOK || !strings.Contains(shown, "oncall") {
			t.Fatalf("GET %s = %d %s; want the call's arguments", path, status, shown)
		}
		if strings.Contains(shown, pagerRef) {
			t.Errorf("GET %s shows the sensitive value: %s", path, shown)
		}
	}
}
