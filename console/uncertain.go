package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/signin"
)

func (c *Console) uncertainRoutes(mux *http.ServeMux) {
	mux.Handle("GET "+Path+"/uncertain", c.page(c.uncertainList))
	mux.Handle("POST "+Path+"/uncertain/reconcile", c.action(c.reconcile))
}

// uncertainView is an uncertain action as the page shows it: what is
// known of the call, its arguments redacted as the API shows them.
type uncertainView struct {
	toolplane.Claim
	Arguments   string
	Agent, User string
	Description string
}

type uncertainPage struct {
	frame
	Items []uncertainView
	Next  string
	// Reconcile is set when the person may settle actions
	// (invoke.MayReconcile); the forms post to Action.
	Reconcile bool
	Action    string
	CSRF      string
	// Codes are the failure codes a reconciliation may give.
	Codes []toolplane.Code
}

// failureCodes are the codes a definite failure may carry: a tool's own
// codes (handler.ToolCode), which invoke.Reconcile accepts.
var failureCodes = slices.DeleteFunc(slices.Clone(toolplane.Codes), func(c toolplane.Code) bool { return !handler.ToolCode(c) })

func (c *Console) uncertainList(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	cs, next, err := c.cfg.Invoker.Uncertain(r.Context(), r.URL.Query().Get("cursor"), pageSize, sess.Credential)
	if err != nil {
		return err
	}
	v := uncertainPage{frame: c.frameFor(sess, "Uncertain actions", "uncertain"), Action: c.path("/uncertain/reconcile"),
		CSRF: sess.CSRF, Codes: failureCodes, Reconcile: invoke.MayReconcile(sess.Credential) == nil}
	v.Notice = r.URL.Query().Get("done")
	if v.Notice != "" {
		v.Notice = "The action was reconciled: identical calls now answer what you recorded."
	}
	for _, cl := range cs {
		shown := approval.ShownArguments(cl.Arguments, c.cfg.Registry.Sensitive(cl.OrganizationID, cl.Tool, ""))
		u := uncertainView{Claim: cl, Arguments: indent(shown)}
		if inv, err := decodeInvocation(cl.Invocation); err == nil {
			u.Agent, u.User = inv.AgentID, inv.UserID
		}
		if t, ok := c.cfg.Registry.Get(cl.OrganizationID, cl.Tool); ok {
			u.Description = t.Def.Description
		}
		v.Items = append(v.Items, u)
	}
	if next != "" {
		v.Next = c.path("/uncertain") + "?" + url.Values{"cursor": {next}}.Encode()
	}
	c.render(w, r, http.StatusOK, "uncertain", v)
	return nil
}

func (c *Console) reconcile(w http.ResponseWriter, r *http.Request, sess *signin.Session) error {
	tool, key := r.PostFormValue("tool"), r.PostFormValue("key")
	if err := toolplane.CheckLen("tool", tool, toolplane.MaxNameLen); err != nil {
		return err
	}
	if err := toolplane.CheckLen("key", key, toolplane.MaxRunLen); err != nil {
		return err
	}
	var rec invoke.Reconciliation
	switch r.PostFormValue("outcome") {
	case "output":
		out, refusal := registry.DecodeArguments(json.RawMessage(r.PostFormValue("output")))
		if refusal != nil {
			return fmt.Errorf("%w: the output is not valid JSON", invoke.ErrBadReconciliation)
		}
		rec.Output = out
	case "failure":
		rec.Failure = &invoke.Failure{Code: toolplane.Code(r.PostFormValue("code")), Message: strings.TrimSpace(r.PostFormValue("message"))}
	case "unconfirmed":
		rec.Unconfirmed = strings.TrimSpace(r.PostFormValue("note"))
		if rec.Unconfirmed == "" {
			return fmt.Errorf("%w: an unconfirmed outcome needs a note saying why nobody can tell", invoke.ErrBadReconciliation)
		}
	default:
		return fmt.Errorf("%w: choose an output, a definite failure, or unconfirmed", invoke.ErrBadReconciliation)
	}
	if _, err := c.cfg.Invoker.Reconcile(r.Context(), tool, key, rec, sess.Credential); err != nil {
		return err
	}
	http.Redirect(w, r, c.path("/uncertain")+"?done=1", http.StatusSeeOther)
	return nil
}

// indent answers JSON indented for reading, or as it is when it is not
// JSON.
func indent(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

// decodeInvocation reads a stored invocation.
func decodeInvocation(b []byte) (*toolplane.Invocation, error) {
	var inv toolplane.Invocation
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("stored invocation: %w", err)
	}
	return &inv, nil
}
