package policy

import (
	"time"
)

// NewRequest answers the document an organization's rules decide in on:
// who calls (the agent, its key's roles), the person it acts for, the tool
// as its definition describes it, the validated arguments, the resolved
// facts, and the context: now in zone (UTC when nil) and the run tree's
// cost so far. It is the one place an Input becomes a Request, so what a
// rule may read grows here (a resolved user's attributes, a team) and
// every engine sees it at once. The request shares in's arguments, facts
// and attributes, which no engine and no record changes.
func NewRequest(in Input, now time.Time, zone *time.Location, runCostCents int64) *Request {
	inv, d := in.Invocation, in.Tool
	if zone == nil {
		zone = time.UTC
	}
	t := now.In(zone)
	r := &Request{
		Principal: Principal{
			Agent: inv.AgentID, Key: inv.CredentialID, Tenant: inv.TenantID,
			Roles: []string{}, Attributes: inv.AgentAttributes,
		},
		Tool: Tool{
			Name: d.Name, Version: d.Version, Effect: string(d.Effect),
			Destructive: d.Annotations.Destructive, ReadOnly: !d.Writes(),
			Tags: nonNil(d.Tags), Classification: d.Classification, Owner: d.Owner,
			Sensitive: nonNil(in.Sensitive),
		},
		Facts: in.Facts,
		Context: Context{
			Time: t, Hour: t.Hour(), Weekday: int(t.Weekday()),
			RunCostCents: runCostCents, Source: string(inv.Source),
		},
	}
	if c := inv.Credential; c != nil {
		r.Principal.Roles = nonNil(c.Roles)
		if r.Principal.Key == "" {
			r.Principal.Key = c.ID
		}
	} else if inv.AgentRoles != nil {
		// A call run later from storage: the roles the caller had.
		r.Principal.Roles = inv.AgentRoles
	}
	// The agent's team is its "team" attribute: its key's, or its token's
	// claim as the deployment maps it.
	if team, ok := inv.AgentAttributes["team"].(string); ok {
		r.Principal.Team = team
	}
	if inv.UserID != "" {
		r.User = &Person{ID: inv.UserID, Roles: []string{}, Groups: []string{}}
		// What the person's identity provider says of them, as the
		// deployment maps its claims: a rule on a group or the manager
		// reads it here.
		if u := inv.User; u != nil {
			r.User.Roles, r.User.Groups, r.User.Manager = nonNil(u.Roles), nonNil(u.Groups), u.Manager
			r.User.Attributes = u.Attributes
		}
		if r.User.Attributes == nil {
			r.User.Attributes = map[string]any{}
		}
	}
	if args, ok := in.Arguments.(map[string]any); ok {
		r.Arguments = args
	}
	// A rule reads an absent object as empty, never as null; an empty one
	// is made only when there is none to share.
	if r.Principal.Attributes == nil {
		r.Principal.Attributes = map[string]any{}
	}
	if r.Arguments == nil {
		r.Arguments = map[string]any{}
	}
	if r.Facts == nil {
		r.Facts = map[string]any{}
	}
	return r
}

// nonNil answers list, or an empty list for nil: a rule reads an absent
// list as empty, never as null.
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}
