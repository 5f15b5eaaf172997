package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// rotateIn are the arguments of vault.rotate, a tool whose arguments carry
// credentials a person approving it must not be shown.
type rotateIn struct {
	User     string `json:"user"`
	Password string `json:"password"`
	Note     string `json:"note"`
}

// secretFixture serves vault.rotate, which waits for approval and records
// the arguments its handler was given.
func secretFixture(t *testing.T, got *sync.Map) *fixture {
	t.Helper()
	store := sqlitetest.New(t)
	d, err := handler.Define[rotateIn, map[string]any](toolplane.Definition{
		Name: "vault.rotate", Version: "1.0.0", Description: "Set a user's password.", Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "vault.rotate"}}, Effect: toolplane.EffectWrite,
		ApprovalPreview: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Annotations.RequiresApproval = true
	no := false
	d.Repeatable = &no
	b, err := handler.Bind("vault.rotate", func(_ context.Context, _ handler.Call, in rotateIn) (map[string]any, error) {
		got.Store("args", in)
		return map[string]any{"rotated": in.User}, nil
	}, nil, handler.WithPreview(handler.TypedPreview(func(_ context.Context, _ handler.Call, in rotateIn) (string, error) {
		return fmt.Sprintf("Set %s's password=%s (%s)", in.User, in.Password, in.Note), nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	if err := hs.Register(b); err != nil {
		t.Fatal(err)
	}
	reg, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, store, reg, hs, "vault.rotate")
}

// A person is shown an approval's arguments and preview with the
// credentials masked, by field name and by shape, while the approved call
// runs with the arguments as the agent sent them.
func TestApprovalIsShownRedactedAndRunsWithTheRealArguments(t *testing.T) {
	t.Parallel()
	const (
		password = "hunter2-approval"
		token    = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	)
	var got sync.Map
	f := secretFixture(t, &got)
	call := `{"arguments":{"user":"ada","password":"` + password + `","note":"use ` + token + `"},"run_id":"run-1"}`
	status, body := f.do(t, "POST", "/v1/tools/vault.rotate/invoke", f.agent, call)
	if status != http.StatusAccepted {
		t.Fatalf("rotate: %d %v", status, body)
	}
	ar := body["approval"].(map[string]any)
	id := ar["id"].(string)
	leaks := func(v any) bool {
		s := toJSON(v)
		return strings.Contains(s, password) || strings.Contains(s, token)
	}
	if leaks(ar["preview"]) {
		t.Errorf("the agent is answered a preview with credentials: %v", ar["preview"])
	}

	status, body = f.do(t, "GET", "/v1/approvals", f.person, "")
	if status != 200 || len(body["items"].([]any)) != 1 {
		t.Fatalf("approvals: %d %v", status, body)
	}
	item := body["items"].([]any)[0].(map[string]any)
	if leaks(item) {
		t.Errorf("a person is shown credentials: %s", toJSON(item))
	}
	args, _ := item["arguments"].(map[string]any)
	if args["user"] != "ada" || args["password"] != "[redacted]" || args["note"] != "use [redacted]" {
		t.Errorf("arguments shown: %v", args)
	}
	if p, _ := item["preview"].(string); !strings.Contains(p, "ada") || !strings.Contains(p, "[redacted]") {
		t.Errorf("preview shown: %q", p)
	}

	if status, body = f.do(t, "POST", "/v1/approvals/"+id+"/approve", f.person, ""); status != 200 {
		t.Fatalf("approve: %d %v", status, body)
	}
	withApproval := strings.Replace(call, `"run_id"`, `"authorized_by":"`+id+`","run_id"`, 1)
	if status, body = f.do(t, "POST", "/v1/tools/vault.rotate/invoke", f.agent, withApproval); status != 200 || body["ok"] != true {
		t.Fatalf("approved call: %d %v", status, body)
	}
	in, ok := got.Load("args")
	if !ok {
		t.Fatal("the approved call never ran")
	}
	if want := (rotateIn{User: "ada", Password: password, Note: "use " + token}); in != want {
		t.Errorf("the approved call ran with %+v, want %+v", in, want)
	}
}

// The 202 says what the caller does next, and it holds: once the approval
// is answered, the identical call in the same run answers the result with
// no authorized_by; authorized_by is only for another run.
func TestApprovalAnswerSaysTheSameRunNeedsNoAuthorizedBy(t *testing.T) {
	t.Parallel()
	var got sync.Map
	f := secretFixture(t, &got)
	call := `{"arguments":{"user":"ada","password":"pw-1","note":"n"},"run_id":"run-9"}`
	status, body := f.do(t, "POST", "/v1/tools/vault.rotate/invoke", f.agent, call)
	if status != http.StatusAccepted {
		t.Fatalf("rotate: %d %v", status, body)
	}
	id := body["approval"].(map[string]any)["id"].(string)
	msg, _ := body["message"].(string)
	if !strings.Contains(msg, id) || !strings.Contains(msg, "same run_id") || !strings.Contains(msg, "no authorized_by needed") ||
		!strings.Contains(msg, "another run names the approval in authorized_by") {
		t.Errorf("the 202 says %q", msg)
	}
	if status, body = f.do(t, "POST", "/v1/approvals/"+id+"/approve", f.person, ""); status != 200 {
		t.Fatalf("approve: %d %v", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, body = f.do(t, "POST", "/v1/tools/vault.rotate/invoke", f.agent, call)
		if status == http.StatusOK && body["ok"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the same call in the same run, without authorized_by: %d %v", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
