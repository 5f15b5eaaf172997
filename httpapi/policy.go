package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/httperr"
	"github.com/toolplane/toolplane/rules"
)

// maxPolicyBody bounds a request carrying a bundle: the bundle's own bound
// with room for JSON's escaping of every byte of it.
const maxPolicyBody = 2*rules.MaxBundleBytes + 64<<10

// policyRoute serves h when the server decides with an organization's
// rules; otherwise the route answers 404.
func (s *Server) policyRoute(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return s.auth(func(w http.ResponseWriter, r *http.Request, c caller) {
		if s.Rules == nil {
			httperr.Send(w, r, httperr.NotFound, fmt.Sprintf("%s is not enabled on this server", r.URL.Path), "")
			return
		}
		h(w, r, c)
	})
}

// decodePolicyBody decodes a body that may carry a bundle's files.
func decodePolicyBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxPolicyBody))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the request body is not valid: %v", err)
	}
	return nil
}

// policyFail answers a refusal of the rules service: a bundle that cannot
// be published names the failing tests or the file and line.
func (s *Server) policyFail(w http.ResponseWriter, r *http.Request, err error) {
	if tf, ok := errors.AsType[*rules.TestsFailedError](err); ok {
		// The message lists every failing test, one a line.
		httperr.Send(w, r, httperr.InvalidRequest, tf.Error(), "files")
		return
	}
	httperr.Fail(w, r, s.Log, err)
}

// bundleView is a bundle as the API shows it, with the zone its rules read
// time in (the deployment's when it names none); files only when shown one
// by one.
func (s *Server) bundleView(b *toolplane.PolicyBundle) map[string]any {
	out := map[string]any{"version": b.Version, "language": b.Language, "digest": b.Digest, "time_zone": s.Rules.TimeZone(b),
		"disabled": b.Disabled, "published_by": b.PublishedBy, "published_at": b.PublishedAt, "note": b.Note}
	if b.Files != nil {
		out["files"] = b.Files
	}
	return out
}

func (s *Server) listPolicyBundles(w http.ResponseWriter, r *http.Request, c caller) {
	limit, err := limitOf(r)
	if err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "limit")
		return
	}
	var before int64
	if v := r.URL.Query().Get("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before < 1 {
			httperr.Send(w, r, httperr.InvalidRequest, "before must be a version number", "before")
			return
		}
	}
	list, err := s.Rules.List(r.Context(), before, limit, c.cred)
	if err != nil {
		s.policyFail(w, r, err)
		return
	}
	items := make([]map[string]any, len(list))
	for i := range list {
		items[i] = s.bundleView(&list[i])
	}
	next := ""
	if len(list) == limit {
		next = strconv.FormatInt(list[len(list)-1].Version, 10)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_before": next})
}

func (s *Server) getPolicyBundle(w http.ResponseWriter, r *http.Request, c caller) {
	var version int64
	if v := r.PathValue("version"); v != "latest" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			httperr.Send(w, r, httperr.InvalidRequest, "a version is a number from 1, or latest", "version")
			return
		}
		version = n
	}
	b, err := s.Rules.Show(r.Context(), version, c.cred)
	if err != nil {
		s.policyFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.bundleView(b))
}

// filesBody is the body of a request carrying a candidate bundle.
type filesBody struct {
	Files map[string]string `json:"files"`
}

func (s *Server) testPolicyBundle(w http.ResponseWriter, r *http.Request, c caller) {
	if err := rules.MayRead(c.cred); err != nil {
		s.policyFail(w, r, err)
		return
	}
	var body filesBody
	if err := decodePolicyBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	res, err := s.Rules.Test(r.Context(), body.Files, c.cred)
	if err != nil {
		s.policyFail(w, r, err)
		return
	}
	passed := len(res) > 0
	for _, t := range res {
		passed = passed && t.Pass
	}
	writeJSON(w, http.StatusOK, map[string]any{"passed": passed, "results": res})
}

func (s *Server) publishPolicyBundle(w http.ResponseWriter, r *http.Request, c caller) {
	if err := rules.MayPublish(c.cred); err != nil {
		s.policyFail(w, r, err)
		return
	}
	var body struct {
		Files    map[string]string `json:"files"`
		Note     string            `json:"note"`
		TimeZone string            `json:"time_zone"`
	}
	if err := decodePolicyBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	b, err := s.Rules.Publish(r.Context(), body.Files, rules.PublishOptions{Note: body.Note, TimeZone: body.TimeZone}, c.cred)
	if err != nil {
		s.policyFail(w, r, err)
		return
	}
	b.Files = nil
	writeJSON(w, http.StatusCreated, s.bundleView(b))
}

func (s *Server) shadowPolicyBundle(w http.ResponseWriter, r *http.Request, c caller) {
	if err := rules.MayShadow(c.cred); err != nil {
		s.policyFail(w, r, err)
		return
	}
	var body struct {
		Files map[string]string `json:"files"`
		Days  int               `json:"days"`
	}
	if err := decodePolicyBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	if body.Days == 0 {
		body.Days = 7
	}
	if body.Days < 1 || body.Days > rules.MaxShadowDays {
		httperr.Send(w, r, httperr.InvalidRequest, fmt.Sprintf("days must be 1 to %d", rules.MaxShadowDays), "days")
		return
	}
	rep, err := s.Rules.Shadow(r.Context(), body.Files, s.Now().Add(-time.Duration(body.Days)*24*time.Hour), c.cred)
	if err != nil {
		s.policyFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) rollbackPolicyBundle(w http.ResponseWriter, r *http.Request, c caller) {
	if err := rules.MayPublish(c.cred); err != nil {
		s.policyFail(w, r, err)
		return
	}
	n, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
	if err != nil || n < 1 {
		httperr.Send(w, r, httperr.InvalidRequest, "a version is a number from 1", "version")
		return
	}
	var body struct {
		Note string `json:"note"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	b, err := s.Rules.Rollback(r.Context(), n, body.Note, c.cred)
	if err != nil {
		s.policyFail(w, r, err)
		return
	}
	b.Files = nil
	writeJSON(w, http.StatusCreated, s.bundleView(b))
}

func (s *Server) disablePolicy(w http.ResponseWriter, r *http.Request, c caller) {
	if err := rules.MayPublish(c.cred); err != nil {
		s.policyFail(w, r, err)
		return
	}
	var body struct {
		Note string `json:"note"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	b, err := s.Rules.Disable(r.Context(), body.Note, c.cred)
	if err != nil {
		s.policyFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.bundleView(b))
}

func (s *Server) explainPolicy(w http.ResponseWriter, r *http.Request, c caller) {
	if err := rules.MayRead(c.cred); err != nil {
		s.policyFail(w, r, err)
		return
	}
	var body struct {
		AgentID   string         `json:"agent_id"`
		UserID    string         `json:"user_id"`
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := decodeBody(r, &body); err != nil {
		httperr.Send(w, r, httperr.InvalidRequest, err.Error(), "")
		return
	}
	if body.AgentID == "" {
		httperr.Send(w, r, httperr.InvalidRequest, "agent_id: name the agent whose call to explain", "agent_id")
		return
	}
	t, ok := s.Door.Registry.Get(c.cred.OrganizationID, body.Tool)
	if !ok {
		httperr.Send(w, r, httperr.NotFound, "no tool named "+body.Tool, "tool")
		return
	}
	// The rules read the arguments a call would carry to them: validated
	// (and coerced) by the tool's input schema, as the invoker's are.
	var in any = body.Arguments
	if body.Arguments == nil {
		in = map[string]any{}
	}
	args, _, bad := t.Arguments(in)
	if bad != nil {
		httperr.Send(w, r, httperr.InvalidRequest, "arguments: "+bad.Error.Message, "arguments"+bad.Error.FieldPath)
		return
	}
	valid, _ := args.(map[string]any)
	ex, err := s.Rules.Explain(r.Context(), body.AgentID, body.UserID, &t.Def, valid, t.Input().Sensitive(), c.cred)
	if err != nil {
		s.policyFail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ex)
}
