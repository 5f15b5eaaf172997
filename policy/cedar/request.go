package cedar

import (
	"encoding/json"
	"fmt"
	"math"

	cedargo "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	"github.com/cedar-policy/cedar-go/x/exp/schema/resolved"

	"github.com/toolplane/toolplane/policy"
)

// The entity types and the one action of the mapping.
const (
	typeAgent = cedargo.EntityType("Agent")
	typeUser  = cedargo.EntityType("User")
	typeTool  = cedargo.EntityType("Tool")
	typeRole  = cedargo.EntityType("Role")
	typeGroup = cedargo.EntityType("Group")
	typeTeam  = cedargo.EntityType("Team")
)

var actionCall = cedargo.NewEntityUID("Action", "call")

// shapes are the declared types of the Request's open parts: what the
// bundle's rules can read of them. A part the bundle's schema leaves out
// is the empty record, of which no rule reads anything.
type shapes struct {
	arguments, facts, agentAttributes, userAttributes resolved.RecordType
}

// converter maps one request's values to Cedar, counting them against the
// input bounds.
type converter struct {
	budget policy.InputBudget
}

// mapRequest maps a Request to Cedar's entities and request (the package
// comment and docs/policy.md describe the mapping). Of each open part only
// the attributes the bundle's schema declares are converted: the Cedar
// validator refuses a rule reading any other, so nothing else can change
// a decision, and the caller's other values cost nothing. What is
// converted is bounded (policy.MaxInputValues); a request past a bound
// answers a *policy.InputBoundError.
func mapRequest(req *policy.Request, sh *shapes) (cedargo.EntityMap, cedargo.Request, error) {
	var c converter
	p := &req.Principal
	agentAttrs, err := c.part("principal.attributes", p.Attributes, sh.agentAttributes)
	if err != nil {
		return nil, cedargo.Request{}, err
	}
	parents := make([]cedargo.EntityUID, 0, len(p.Roles)+1)
	for _, role := range p.Roles {
		parents = append(parents, cedargo.NewEntityUID(typeRole, cedargo.String(role)))
	}
	if p.Team != "" {
		parents = append(parents, cedargo.NewEntityUID(typeTeam, cedargo.String(p.Team)))
	}
	agent := cedargo.NewEntityUID(typeAgent, cedargo.String(p.Agent))
	tool := cedargo.NewEntityUID(typeTool, cedargo.String(req.Tool.Name))
	entities := make(cedargo.EntityMap, 3)
	entities[agent] = cedargo.Entity{
		UID:     agent,
		Parents: cedargo.NewEntityUIDSet(parents...),
		Attributes: cedargo.NewRecord(cedargo.RecordMap{
			"key":        cedargo.String(p.Key),
			"roles":      stringSet(p.Roles),
			"team":       cedargo.String(p.Team),
			"tenant":     cedargo.String(p.Tenant),
			"attributes": agentAttrs,
		}),
	}
	t := &req.Tool
	entities[tool] = cedargo.Entity{
		UID: tool,
		Attributes: cedargo.NewRecord(cedargo.RecordMap{
			"name":           cedargo.String(t.Name),
			"version":        cedargo.String(t.Version),
			"effect":         cedargo.String(t.Effect),
			"destructive":    cedargo.Boolean(t.Destructive),
			"read_only":      cedargo.Boolean(t.ReadOnly),
			"tags":           stringSet(t.Tags),
			"classification": cedargo.String(t.Classification),
			"owner":          cedargo.String(t.Owner),
			"sensitive":      stringSet(t.Sensitive),
		}),
	}
	args, err := c.part("arguments", req.Arguments, sh.arguments)
	if err != nil {
		return nil, cedargo.Request{}, err
	}
	facts, err := c.part("facts", req.Facts, sh.facts)
	if err != nil {
		return nil, cedargo.Request{}, err
	}
	ctxRec := &req.Context
	ctx := cedargo.RecordMap{
		"arguments":      args,
		"facts":          facts,
		"time":           cedargo.NewDatetime(ctxRec.Time),
		"hour":           cedargo.Long(ctxRec.Hour),
		"weekday":        cedargo.Long(ctxRec.Weekday),
		"run_cost_cents": cedargo.Long(ctxRec.RunCostCents),
		"source":         cedargo.String(ctxRec.Source),
	}
	if u := req.User; u != nil {
		userAttrs, err := c.part("user.attributes", u.Attributes, sh.userAttributes)
		if err != nil {
			return nil, cedargo.Request{}, err
		}
		parents := make([]cedargo.EntityUID, 0, len(u.Roles)+len(u.Groups))
		for _, g := range u.Groups {
			parents = append(parents, cedargo.NewEntityUID(typeGroup, cedargo.String(g)))
		}
		for _, role := range u.Roles {
			parents = append(parents, cedargo.NewEntityUID(typeRole, cedargo.String(role)))
		}
		user := cedargo.NewEntityUID(typeUser, cedargo.String(u.ID))
		entities[user] = cedargo.Entity{
			UID:     user,
			Parents: cedargo.NewEntityUIDSet(parents...),
			Attributes: cedargo.NewRecord(cedargo.RecordMap{
				"roles":      stringSet(u.Roles),
				"groups":     stringSet(u.Groups),
				"manager":    cedargo.String(u.Manager),
				"attributes": userAttrs,
			}),
		}
		ctx["user"] = user
	}
	return entities, cedargo.Request{
		Principal: agent,
		Action:    actionCall,
		Resource:  tool,
		Context:   cedargo.NewRecord(ctx),
	}, nil
}

func stringSet(ss []string) cedargo.Set {
	vs := make([]cedargo.Value, len(ss))
	for i, s := range ss {
		vs[i] = cedargo.String(s)
	}
	return cedargo.NewSet(vs...)
}

// part converts one open part of the request: the members its declared
// shape names.
func (c *converter) part(name string, m map[string]any, shape resolved.RecordType) (cedargo.Record, error) {
	r, err := c.record(m, shape)
	if err != nil {
		return cedargo.Record{}, within(name, err)
	}
	return r, nil
}

// within prefixes a bound's path with where its value lies; other errors
// are wrapped as they were.
func within(name string, err error) error {
	if be, ok := err.(*policy.InputBoundError); ok {
		return be.Within(name)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// record maps the members of a JSON object that shape declares to a Cedar
// record, walking the shape (the bundle's, of bounded size) rather than the
// object, so undeclared members cost nothing. A null member is left out
// (Cedar has no null: a rule asks `has` instead).
func (c *converter) record(m map[string]any, shape resolved.RecordType) (cedargo.Record, error) {
	if len(m) == 0 || len(shape) == 0 {
		return cedargo.NewRecord(nil), nil
	}
	rm := make(cedargo.RecordMap, min(len(m), len(shape)))
	for k, attr := range shape {
		v, ok := m[string(k)]
		if !ok || v == nil {
			continue
		}
		if err := c.budget.Name(len(k)); err != nil {
			return cedargo.Record{}, within(string(k), err)
		}
		cv, err := c.typed(v, attr.Type)
		if err != nil {
			return cedargo.Record{}, within(string(k), err)
		}
		rm[k] = cv
	}
	return cedargo.NewRecord(rm), nil
}

// typed maps a JSON value the schema declares of type t: a record keeps
// its declared members, a set's elements are mapped by its element type,
// and anything else (a scalar, an entity, an extension type, or a value
// not of its declared type, which a rule reading it faults on) is mapped
// whole.
func (c *converter) typed(v any, t resolved.IsType) (cedargo.Value, error) {
	switch t := t.(type) {
	case resolved.RecordType:
		if m, ok := v.(map[string]any); ok {
			if err := c.budget.Value(); err != nil {
				return nil, err
			}
			return c.record(m, t)
		}
	case resolved.SetType:
		if list, ok := v.([]any); ok {
			if err := c.budget.List(len(list)); err != nil {
				return nil, err
			}
			vs := make([]cedargo.Value, 0, len(list))
			for i, e := range list {
				if e == nil {
					continue
				}
				cv, err := c.typed(e, t.Element)
				if err != nil {
					return nil, within(fmt.Sprintf("[%d]", i), err)
				}
				vs = append(vs, cv)
			}
			return cedargo.NewSet(vs...), nil
		}
	}
	return c.value(v)
}

// value maps one JSON value to Cedar: an integral number is a Long, any
// other number a decimal (four places, as Cedar's decimal holds), an array
// a Set (Cedar has no list: order and duplicates are lost), an object a
// record of all its members.
func (c *converter) value(v any) (cedargo.Value, error) {
	switch v := v.(type) {
	case string:
		if err := c.budget.Text(len(v)); err != nil {
			return nil, err
		}
		return cedargo.String(v), nil
	case bool:
		return cedargo.Boolean(v), c.budget.Value()
	case float64:
		if err := c.budget.Value(); err != nil {
			return nil, err
		}
		return number(v)
	case int:
		return cedargo.Long(v), c.budget.Value()
	case int64:
		return cedargo.Long(v), c.budget.Value()
	case json.Number:
		if err := c.budget.Value(); err != nil {
			return nil, err
		}
		if n, err := v.Int64(); err == nil {
			return cedargo.Long(n), nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, err
		}
		return number(f)
	case []string:
		if err := c.budget.List(len(v)); err != nil {
			return nil, err
		}
		vs := make([]cedargo.Value, len(v))
		for i, s := range v {
			if err := c.budget.Text(len(s)); err != nil {
				return nil, within(fmt.Sprintf("[%d]", i), err)
			}
			vs[i] = cedargo.String(s)
		}
		return cedargo.NewSet(vs...), nil
	case []any:
		if err := c.budget.List(len(v)); err != nil {
			return nil, err
		}
		vs := make([]cedargo.Value, 0, len(v))
		for i, e := range v {
			if e == nil {
				continue
			}
			cv, err := c.value(e)
			if err != nil {
				return nil, within(fmt.Sprintf("[%d]", i), err)
			}
			vs = append(vs, cv)
		}
		return cedargo.NewSet(vs...), nil
	case map[string]any:
		if err := c.budget.Value(); err != nil {
			return nil, err
		}
		rm := make(cedargo.RecordMap, len(v))
		for k, e := range v {
			if e == nil {
				continue
			}
			if err := c.budget.Name(len(k)); err != nil {
				return nil, within(k, err)
			}
			cv, err := c.value(e)
			if err != nil {
				return nil, within(k, err)
			}
			rm[cedargo.String(k)] = cv
		}
		return cedargo.NewRecord(rm), nil
	}
	return nil, fmt.Errorf("a %T has no Cedar value", v)
}

func number(f float64) (cedargo.Value, error) {
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return cedargo.Long(int64(f)), nil
	}
	d, err := types.NewDecimalFromFloat(f)
	if err != nil {
		return nil, fmt.Errorf("number %v: %w", f, err)
	}
	return d, nil
}
