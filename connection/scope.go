package connection

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"path"
	"slices"
	"strings"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

// checkScope refuses a call the connection's scope does not admit, a
// second enforcement point beside the policy: the tool, the agent, the
// amount, and the host an HTTP tool sends to.
func (s *Broker) checkScope(c *toolplane.Connection, inv *toolplane.Invocation, d *toolplane.Definition, args any) error {
	deny := func(format string, a ...any) error {
		return &toolplane.ConnectionError{Code: toolplane.CodeDenied, Message: fmt.Sprintf(format, a...) + "; nothing was done"}
	}
	sc := c.Scope
	if len(sc.Tools) > 0 && !slices.ContainsFunc(sc.Tools, func(p string) bool { ok, _ := path.Match(p, d.Name); return ok }) {
		return deny("connection %s may not be used by %s", c.ID, d.Name)
	}
	if len(sc.Agents) > 0 && !slices.Contains(sc.Agents, inv.AgentID) {
		return deny("connection %s may not be used by agent %s", c.ID, inv.AgentID)
	}
	if sc.MaxAmountCentsPerCall > 0 {
		name := sc.AmountArgument
		if name == "" {
			name = "amount_cents"
		}
		if m, ok := args.(map[string]any); ok {
			if v, present := m[name]; present {
				n, ok := amount(v)
				if !ok || n.Cmp(big.NewInt(sc.MaxAmountCentsPerCall)) > 0 {
					return deny("%s is above the %d cents connection %s allows per call", name, sc.MaxAmountCentsPerCall, c.ID)
				}
			}
		}
	}
	if h := d.Binding.HTTP; h != nil {
		sent := h.URL
		if toolplane.RelativeURL(h.URL) {
			// A path is sent under the connection's base URL.
			if sent = c.Config.BaseURL; sent == "" {
				return deny("%s's URL is a path, and connection %s has no base_url to send it under", d.Name, c.ID)
			}
		}
		host, ok := s.hosts.host(sent)
		if !ok {
			return deny("the tool's URL does not parse")
		}
		p, err := s.egress(c)
		if err != nil {
			return err
		}
		if err := p.CheckHost(host); err != nil {
			return deny("%s sends to %s, which connection %s does not allow", d.Name, host, c.ID)
		}
	}
	return nil
}

// checkConsent refuses a person's connection whose application now asks
// for scopes the person did not grant: scope creep is never absorbed
// silently; the person consents again.
func (s *Broker) checkConsent(ctx context.Context, mem *memory, c *toolplane.Connection, inv *toolplane.Invocation, d *toolplane.Definition) error {
	if c.Kind != toolplane.ConnectionAuthorizationCode || c.Config.App == "" {
		return nil
	}
	app, err := mem.get(ctx, s.cfg.Store, c.OrganizationID, c.Config.App)
	if err != nil {
		return fmt.Errorf("read the application of connection %s: %w", c.ID, err)
	}
	if err := checkUsable(app); err != nil {
		return err
	}
	if missing := missingScopes(app.Config.RequestScope, c.Scopes); len(missing) > 0 {
		return &toolplane.ConnectionError{Code: toolplane.CodeConnectionExpired,
			Message:          fmt.Sprintf("connection %s must be authorized again for the scopes %s; nothing was done. Ask the user to reconnect, then call again.", c.ID, strings.Join(missing, " ")),
			AuthorizationURL: s.authorizeLink(ctx, inv, d)}
	}
	return nil
}

// egress answers c's compiled egress rules, compiling them once per
// connection version: a policy carries a transport of its own, too much
// to build on every call for one host check.
func (s *Broker) egress(c *toolplane.Connection) (*egress.Policy, error) {
	if d, ok := s.mem.version(c); ok && d.policy != nil {
		return d.policy, nil
	}
	p, err := egress.Compile(c.Config.Egress)
	if err != nil {
		return nil, fmt.Errorf("connection %s: egress rules: %w", c.ID, err)
	}
	s.mem.keepVersion(c, func(d *derived) { d.policy = p })
	return p, nil
}

// amount reads an argument as a whole number of cents.
func amount(v any) (*big.Int, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case float64:
		s = fmt.Sprintf("%.0f", x)
		if float64(int64(x)) != x {
			return nil, false
		}
	case int:
		return big.NewInt(int64(x)), true
	case int64:
		return big.NewInt(x), true
	case string:
		s = x
	default:
		return nil, false
	}
	n, ok := new(big.Int).SetString(s, 10)
	return n, ok
}
