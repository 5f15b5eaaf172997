package invoke_test

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/registry"
)

// TestApprovedCallRunsTheVersionApproved: a person approves a call of the
// version it was filed for (the approval records it, and Resolve checks it
// is still callable); a newer version published while the approval waited
// is not what runs on resume. Its handler, its arguments' meaning, its
// effect may all differ: nobody approved it.
//
// This fails on main: ExecuteApproved (and a model's repeated call with
// authorized_by) resolves the tool afresh, to the newest version within
// the principal's pin, and Covers compares name, run, arguments hash and
// key, not the version. The resume now runs the version approved, and a
// call the approval would cover at another version answers tool_changed.
func TestApprovedCallRunsTheVersionApproved(t *testing.T) {
	t.Parallel()
	var reg *registry.Registry
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) { reg = c.Registry },
		tool{def: gated("mail.v1"), fn: ok(map[string]any{"id": "m1"})},
		tool{def: gated("mail.v2"), fn: ok(map[string]any{"id": "m2"})})
	published := func(version, handlerKey string) toolplane.Definition {
		d := gated("email.send")
		d.Version, d.Binding.Handler.Key = version, handlerKey
		return d
	}
	if ps := reg.SetVersions("published", []registry.Version{{Def: published("1.0.0", "mail.v1"), State: toolplane.StateActive}}); len(ps) != 0 {
		t.Fatal(ps)
	}
	in := inv("email.send")
	ar := must(t).Approval(e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), in))
	e.resolve(ar.ID, true)

	// While the approved call waits for its resume, 2.0.0 is published.
	if ps := reg.SetVersions("published", []registry.Version{
		{Def: published("1.0.0", "mail.v1"), State: toolplane.StateActive},
		{Def: published("2.0.0", "mail.v2"), State: toolplane.StateActive},
	}); len(ps) != 0 {
		t.Fatal(ps)
	}
	// The model asks again with the approval: the call would resolve to
	// 2.0.0, which the approval does not cover.
	again := inv("email.send")
	again.AuthorizedBy = ar.ID
	r, err := e.iv.Invoke(context.Background(), "email.send", args("to", "jo@acme.test"), again)
	code(t, r, err, toolplane.CodeToolChanged)
	if e.count("mail.v1")+e.count("mail.v2") != 0 {
		t.Fatalf("a call ran on an approval of another version: v1 %d, v2 %d", e.count("mail.v1"), e.count("mail.v2"))
	}
	r, err = e.iv.ExecuteApproved(context.Background(), "org-1", ar.ID)
	if e.count("mail.v2") != 0 {
		t.Fatalf("the resume ran 2.0.0, which nobody approved: %+v %v", r, err)
	}
	if e.count("mail.v1") != 1 {
		t.Errorf("the approved 1.0.0 ran %d times: %+v %v", e.count("mail.v1"), r, err)
	}
}
