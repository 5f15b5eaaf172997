package cedar

import (
	"encoding/json"
	"fmt"
	"math"

	cedargo "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"

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

// mapRequest maps a Request to Cedar's entities and request (the package
// comment and docs/policy.md describe the mapping).
func mapRequest(req *policy.Request) (cedargo.EntityMap, cedargo.Request, error) {
	p := &req.Principal
	agentAttrs, err := record(p.Attributes)
	if err != nil {
		return nil, cedargo.Request{}, fmt.Errorf("principal.attributes: %w", err)
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
	args, err := record(req.Arguments)
	if err != nil {
		return nil, cedargo.Request{}, fmt.Errorf("arguments: %w", err)
	}
	facts, err := record(req.Facts)
	if err != nil {
		return nil, cedargo.Request{}, fmt.Errorf("facts: %w", err)
	}
	c := &req.Context
	ctx := cedargo.RecordMap{
		"arguments":      args,
		"facts":          facts,
		"time":           cedargo.NewDatetime(c.Time),
		"hour":           cedargo.Long(c.Hour),
		"weekday":        cedargo.Long(c.Weekday),
		"run_cost_cents": cedargo.Long(c.RunCostCents),
		"source":         cedargo.String(c.Source),
	}
	if u := req.User; u != nil {
		userAttrs, err := record(u.Attributes)
		if err != nil {
			return nil, cedargo.Request{}, fmt.Errorf("user.attributes: %w", err)
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

// record maps a JSON object to a Cedar record. A null member is left out
// (Cedar has no null: a rule asks `has` instead).
func record(m map[string]any) (cedargo.Record, error) {
	rm := make(cedargo.RecordMap, len(m))
	for k, v := range m {
		if v == nil {
			continue
		}
		cv, err := value(v)
		if err != nil {
			return cedargo.Record{}, fmt.Errorf("%s: %w", k, err)
		}
		rm[cedargo.String(k)] = cv
	}
	return cedargo.NewRecord(rm), nil
}

// value maps one JSON value to Cedar: an integral number is a Long, any
// other number a decimal (four places, as Cedar's decimal holds), an array
// a Set (Cedar has no list: order and duplicates are lost).
func value(v any) (cedargo.Value, error) {
	switch v := v.(type) {
	case string:
		return cedargo.String(v), nil
	case bool:
		return cedargo.Boolean(v), nil
	case float64:
		return number(v)
	case int:
		return cedargo.Long(v), nil
	case int64:
		return cedargo.Long(v), nil
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return cedargo.Long(n), nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, err
		}
		return number(f)
	case []string:
		return stringSet(v), nil
	case []any:
		vs := make([]cedargo.Value, 0, len(v))
		for i, e := range v {
			if e == nil {
				continue
			}
			cv, err := value(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			vs = append(vs, cv)
		}
		return cedargo.NewSet(vs...), nil
	case map[string]any:
		return record(v)
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
