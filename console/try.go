package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/signin"
)

// A tool's Try page calls the tool from the console: a form generated
// from its input schema (schemaform.go), sent as a call of a named test
// agent through the door layer and the one invoker, so the call is
// validated, decided (grants, policy, approval), journalled and audited
// as any agent's is. The page then shows what a model would read: the
// tool's declaration as a model is shown it, and the rendered result.

func (c *Console) tryRoutes(mux *http.ServeMux) {
	// More specific than the catalogue's /catalog/{name}/{version}: a
	// version is a semantic version, never "try".
	mux.Handle("GET "+Path+"/catalog/{name}/try", c.page(c.tryForm))
	mux.Handle("POST "+Path+"/catalog/{name}/try", c.action(c.tryCall))
}

// TestAgentPrefix begins the agent identity a person's calls from a Try
// page are made as: "console-test:<person>", in the person's
// organization.
//
// The test agent holds no power of its own and lends the person none. Its
// credential is never stored and admits every tool its identity is
// granted, and every call it makes acts for the signed-in person (as a
// token issued to an agent for a person does, Credential.ActsFor, with
// the person's approver groups as their claims). So a call is decided as
// any delegated call: the grants of the identity "console-test:<person>"
// (which an agent_operator gives, like any agent's) AND the person's own
// grants, or their groups', must both allow the tool; denies, rules,
// approvals, budgets and the audit trail apply as to any agent; and the
// person, named as whom the call acts for, may not approve it themselves.
// Where no grant service runs, an agent's key is its grant, and the test
// agent's names no tool: every call is refused.
const TestAgentPrefix = "console-test:"

// sourceConsole is the source a Try call is recorded with.
const sourceConsole toolplane.Source = "console"

// tryStep is the step path of a Try call.
const tryStep = "console.try"

// testAgent answers the credential of the person's test agent (see
// TestAgentPrefix); sessionID names the browser session it is made for,
// so the trail tells one session's calls from another's.
func testAgent(person *toolplane.Credential, sessionID string) *toolplane.Credential {
	var groups []string
	for _, r := range person.Roles {
		if g, ok := strings.CutPrefix(r, toolplane.GroupRolePrefix); ok && g != "" {
			groups = append(groups, g)
		}
	}
	return &toolplane.Credential{
		ID: "console:" + sessionID, OrganizationID: person.OrganizationID, Kind: toolplane.CredentialAgent,
		Subject: TestAgentPrefix + person.Subject, ActsFor: person.Subject, User: &toolplane.User{Groups: groups},
		Label: "console test agent",
	}
}

// gate answers the door layer calls are made through: the server's, or
// one over the console's invoker and registry (no grant service: the test
// agent is then shown no tool).
func (c *Console) gate() *door.Door {
	if c.cfg.Door != nil {
		return c.cfg.Door
	}
	return &door.Door{Invoker: c.cfg.Invoker, Registry: c.cfg.Registry, Log: c.log, Now: c.cfg.Now}
}

// tryPage is a tool's Try page.
type tryPage struct {
	frame
	// Name is the tool's platform name, Version the version a call gets,
	// ModelName what a model calls it.
	Name, Version, ModelName string
	// Agent is the test agent's identity; Shown whether it is shown the
	// tool (a call of a tool not shown is refused).
	Agent string
	Shown bool
	// Declaration is the tool as a model is shown it (its MCP tools/list
	// entry), indented.
	Declaration string
	Form        *schemaForm
	// Action, CSRF and Run are the form's; Run is the run the call is
	// made in, fixed when the page is opened, so sending the same form
	// twice is one call (a write is not made twice). Contract is the
	// schema hash the form was generated from: the call is made under it
	// (a frozen contract), so a tool changed since is refused
	// tool_changed rather than called with a form of another schema.
	Action, CSRF, Run, Contract string
	// Invalid says the form was sent with fields that could not be read.
	Invalid bool
	// Outcome is what the call answered, once sent.
	Outcome *tryOutcome
	// VersionPage is the catalogue's page of the version a call gets.
	VersionPage string
}

// tryOutcome is what a Try call answered.
type tryOutcome struct {
	// Kind is answered (the tool's result), refused (a refusal with its
	// stable code: the tool's, or the door's of the request itself),
	// approval (waiting for a person), in_flight, or accepted (runs
	// later).
	Kind string
	// Code and Message are a refusal's, or what a request lacked; Field
	// names the request's field at fault.
	Code, Message, Field string
	// Pointer and Fix are an invalid_input refusal's field_path and what
	// it suggests, shown at the form's field too.
	Pointer, Fix string
	// Rendered is the result exactly as a model reads it (boundary.Render,
	// the text every door hands a model); Pretty the same, indented.
	Rendered, Pretty string
	Untrusted        bool
	Replayed         bool
	// Approval, ApprovalURL, Expires and Existing describe the approval
	// the call waits for.
	Approval, ApprovalURL string
	Expires               time.Time
	Existing              bool
	// Async is the id of a call accepted to run later.
	Async string
}

// tryTool answers the Try page of the tool named, at the version the
// test agent cred would be given (or, when it is shown none, the version
// callers get), saying whether it is shown it.
func (c *Console) tryTool(ctx context.Context, sess *signin.Session, name string, cred *toolplane.Credential) (*tryPage, error) {
	if err := toolplane.CheckLen("name", name, toolplane.MaxNameLen); err != nil {
		return nil, err
	}
	org := sess.Credential.OrganizationID
	gate := c.gate()
	t, err := gate.ShownTool(ctx, cred, "", name)
	if err != nil {
		return nil, fmt.Errorf("tools shown to %s: %w", cred.Subject, err)
	}
	shown := t != nil
	if t == nil {
		// Not the test agent's: the page still shows what a call would
		// be (and what refuses it), of the version callers get.
		var ok bool
		if t, ok = c.cfg.Registry.Get(org, name); !ok {
			return nil, fmt.Errorf("%w: no tool %s is served in this organization", toolplane.ErrNotFound, name)
		}
	}
	isShown := func(other string) bool {
		s, err := gate.ShownTool(ctx, cred, "", other)
		return err == nil && s != nil
	}
	// Indented for a person, and without escaping <, > and &: the page's
	// template escapes what it shows, and a person reads the text.
	var decl bytes.Buffer
	enc := json.NewEncoder(&decl)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(projection.ShownFor(t, isShown)); err != nil {
		return nil, fmt.Errorf("declaration of %s: %w", name, err)
	}
	v := &tryPage{frame: c.frameFor(sess, "Try "+t.Def.Name, "catalog"), Name: t.Def.Name, Version: t.Def.Version,
		ModelName: projection.MCP(&t.Def).Name, Agent: cred.Subject, Shown: shown, Declaration: decl.String(),
		Form: newSchemaForm(t.Def.InputSchema), Contract: t.Def.SchemaHash, Action: c.path("/catalog/" + url.PathEscape(t.Def.Name) + "/try"), CSRF: sess.CSRF,
		VersionPage: c.path("/catalog/" + url.PathEscape(t.Def.Name) + "/" + url.PathEscape(t.Def.Version))}
	return v, nil
}

func (c *Console) tryForm(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	v, err := c.tryTool(r.Context(), sess, r.PathValue("name"), testAgent(sess.Credential, sess.ID))
	if err != nil {
		return err
	}
	v.Run = newTryRun()
	c.render(w, r, http.StatusOK, "try", v)
	return nil
}

// newTryRun answers a fresh run for a Try page's calls.
func newTryRun() string { return tryRunPrefix + strings.ToLower(rand.Text()[:16]) }

const tryRunPrefix = "console-try-"

// tryRun answers the run a sent form names, when it is one newTryRun made;
// anything else gets a fresh one.
func tryRun(s string) string {
	rest, ok := strings.CutPrefix(s, tryRunPrefix)
	if !ok || len(rest) != 16 || strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		return newTryRun()
	}
	return s
}

func (c *Console) tryCall(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	ctx := r.Context()
	cred := testAgent(sess.Credential, sess.ID)
	v, err := c.tryTool(ctx, sess, r.PathValue("name"), cred)
	if err != nil {
		return err
	}
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("%w: the form could not be read: %v", toolplane.ErrInvalid, err)
	}
	v.Run = tryRun(r.PostForm.Get("run"))
	if sent := r.PostForm.Get("contract"); sent != v.Contract {
		// The fields are numbered by the schema they were made from:
		// read by another, they would land in the wrong arguments.
		v.Notice = "The tool's schema changed since the page was opened; nothing was called. The form below is the new one: fill it in again."
		c.render(w, r, http.StatusConflict, "try", v)
		return nil
	}
	args, ok := v.Form.parse(r.PostForm)
	if !ok {
		v.Invalid = true
		c.render(w, r, http.StatusBadRequest, "try", v)
		return nil
	}
	gate := c.gate()
	// Charged to the rate budget the door keeps per credential, as an
	// agent's call is: a console is not a way around it.
	caller, err := gate.Spend(ctx, door.Caller{Credential: cred}, w.Header())
	var limited *door.Refusal
	switch {
	case errors.As(err, &limited) && limited.Kind == door.RateLimited:
		v.Outcome = &tryOutcome{Kind: "refused", Code: string(httperr.RateLimited), Message: limited.Message}
		c.render(w, r, http.StatusTooManyRequests, "try", v)
		return nil
	case err != nil:
		return err
	}
	ans := gate.Call(ctx, caller, door.Call{
		Tool: v.Name, Arguments: args, Source: sourceConsole, RunID: v.Run, StepPath: tryStep, ReadAt: gate.Clock(),
		Contracts: map[string]string{v.Name: v.Contract},
	})
	out, err := c.outcome(ans)
	if err != nil {
		return err
	}
	v.Outcome = out
	if out.Kind == "refused" && out.Code == string(toolplane.CodeInvalidInput) && out.Pointer != "" {
		v.Form.refusedAt(out.Pointer, out.Fix)
	}
	c.render(w, r, http.StatusOK, "try", v)
	return nil
}

// outcome answers what the page shows of a call's answer; a platform
// fault is the error page's.
func (c *Console) outcome(ans door.Answer) (*tryOutcome, error) {
	switch ans.Kind {
	case door.Answered:
		res := ans.Result
		raw := boundary.Render(res)
		o := &tryOutcome{Kind: "answered", Rendered: string(raw), Untrusted: res.Meta.Untrusted, Replayed: res.Meta.Replayed}
		var pretty bytes.Buffer
		if json.Indent(&pretty, raw, "", "  ") == nil {
			o.Pretty = pretty.String()
		}
		if !res.OK && res.Error != nil {
			e := res.Error
			o.Kind, o.Code, o.Message, o.Field, o.Pointer = "refused", string(e.Code), e.Message, e.FieldPath, e.FieldPath
			if o.Fix = e.SuggestedFix; o.Fix == "" {
				o.Fix = e.Message
			}
		}
		return o, nil
	case door.ApprovalRequired:
		a := ans.Approval
		return &tryOutcome{Kind: "approval", Approval: a.ID, ApprovalURL: c.path("/approvals/" + url.PathEscape(a.ID)),
			Expires: a.ExpiresAt, Existing: a.Existing}, nil
	case door.InFlight:
		msg := ans.Message
		if msg == "" {
			msg = "An identical call is running; send the form again in a moment for its result."
		}
		return &tryOutcome{Kind: "in_flight", Message: msg}, nil
	case door.Accepted:
		return &tryOutcome{Kind: "accepted", Async: ans.Async.ID}, nil
	case door.Invalid, door.Denied:
		code := "invalid_input"
		if ans.Kind == door.Denied {
			code = "denied"
		}
		return &tryOutcome{Kind: "refused", Code: code, Message: ans.Message, Field: ans.Field}, nil
	case door.Unavailable:
		// Logged by the door; the call was not decided, as the API says.
		return &tryOutcome{Kind: "refused", Code: string(toolplane.CodeUnavailable),
			Message: "The grants could not be read, so the call was not decided and nothing ran. Try again later."}, nil
	}
	return nil, fmt.Errorf("try call: %w", ans.Err)
}
