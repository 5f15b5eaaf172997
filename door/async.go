package door

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/async"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/tracectx"
)

// Asynchronous reports whether a call of tool runs later by its
// definition. A deployment without an async service runs every call in
// its request.
func (d *Door) Asynchronous(cred *toolplane.Credential, tool string) bool {
	return d.Async != nil && d.Invoker.Mode(cred.OrganizationID, tool) == toolplane.ModeAsync
}

// submit accepts call for the caller c to run later, with its result
// posted to call.CallbackURL when set: Answer.Kind is Accepted with
// Answer.Async the call (a retry of one accepted before answers that
// one), or, when the call would be refused, the refusal as Call answers
// it, since it ran now. A callback URL the platform will not post to is
// the caller's Invalid request.
func (d *Door) submit(ctx context.Context, c Caller, call Call) Answer {
	cred := c.Credential
	if d.Async == nil {
		field := "mode"
		if call.CallbackURL != "" {
			field = "callback_url"
		}
		return Answer{Kind: Invalid, Field: field, Message: "this deployment runs every call in its request; call without mode async or a callback_url"}
	}
	raw := call.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	inv := d.Invocation(cred, call)
	// The call runs later, on a worker: its span continues the caller's
	// trace from what is stored with it.
	inv.TraceParent, inv.TraceState = tracectx.Strings(ctx)
	sub, err := d.Async.Submit(ctx, async.Request{Tool: call.Tool, Arguments: raw, Invocation: inv, CallbackURL: call.CallbackURL})
	if errors.Is(err, async.ErrCallback) {
		return Answer{Kind: Invalid, Field: "callback_url", Message: err.Error()}
	}
	if err != nil {
		return d.answer(ctx, call.Tool, toolplane.Result{}, err)
	}
	if sub.Ran {
		if invoke.Repeated(sub.Result, sub.Err) {
			d.spendRetry(c)
		}
		return d.answer(ctx, call.Tool, sub.Result, sub.Err)
	}
	if sub.Existing {
		// A retry of an accepted call: charged to the retry budget.
		d.spendRetry(c)
	}
	return Answer{Kind: Accepted, Async: sub.Call, Existing: sub.Existing}
}
