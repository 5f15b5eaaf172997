package rego

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolplane/toolplane/policy"
)

// inputValue builds the input document straight from the Request, with
// the member names of its JSON form (a user only when there is one, time
// in RFC 3339, absent maps as empty objects), without a round trip through
// JSON text on every decision.
func inputValue(req *policy.Request) (ast.Value, error) {
	p := &req.Principal
	principal, err := object(
		str("agent", p.Agent), str("key", p.Key), strs("roles", p.Roles),
		str("team", p.Team), str("tenant", p.Tenant), anyMap("attributes", p.Attributes),
	)
	if err != nil {
		return nil, err
	}
	t := &req.Tool
	tool := ast.NewObject(
		str("name", t.Name), str("version", t.Version), str("effect", t.Effect),
		boolean("destructive", t.Destructive), boolean("read_only", t.ReadOnly), strs("tags", t.Tags),
		str("classification", t.Classification), str("owner", t.Owner), strs("sensitive", t.Sensitive),
	)
	c := &req.Context
	ctx := ast.NewObject(
		str("time", c.Time.Format(time.RFC3339Nano)),
		[2]*ast.Term{ast.StringTerm("hour"), ast.IntNumberTerm(c.Hour)},
		[2]*ast.Term{ast.StringTerm("weekday"), ast.IntNumberTerm(c.Weekday)},
		[2]*ast.Term{ast.StringTerm("run_cost_cents"), ast.NumberTerm(json.Number(strconv.FormatInt(c.RunCostCents, 10)))},
		str("source", c.Source),
	)
	args, err := mapTerm(req.Arguments)
	if err != nil {
		return nil, err
	}
	facts, err := mapTerm(req.Facts)
	if err != nil {
		return nil, err
	}
	items := [][2]*ast.Term{
		{ast.StringTerm("principal"), ast.NewTerm(principal)},
		{ast.StringTerm("tool"), ast.NewTerm(tool)},
		{ast.StringTerm("arguments"), args},
		{ast.StringTerm("facts"), facts},
		{ast.StringTerm("context"), ast.NewTerm(ctx)},
	}
	if u := req.User; u != nil {
		user, err := object(
			str("id", u.ID), strs("roles", u.Roles), strs("groups", u.Groups),
			str("manager", u.Manager), anyMap("attributes", u.Attributes),
		)
		if err != nil {
			return nil, err
		}
		items = append(items, [2]*ast.Term{ast.StringTerm("user"), ast.NewTerm(user)})
	}
	return ast.NewObject(items...), nil
}

// member is one member of an object under construction; a map member is
// converted when the object is built, where its error can be returned.
type member struct {
	key   string
	value map[string]any
}

func str(k, v string) [2]*ast.Term { return [2]*ast.Term{ast.StringTerm(k), ast.StringTerm(v)} }

func boolean(k string, v bool) [2]*ast.Term {
	return [2]*ast.Term{ast.StringTerm(k), ast.BooleanTerm(v)}
}

func strs(k string, vs []string) [2]*ast.Term {
	ts := make([]*ast.Term, len(vs))
	for i, v := range vs {
		ts[i] = ast.StringTerm(v)
	}
	return [2]*ast.Term{ast.StringTerm(k), ast.ArrayTerm(ts...)}
}

func anyMap(k string, m map[string]any) member { return member{key: k, value: m} }

// object builds an object of members and pairs.
func object(parts ...any) (ast.Object, error) {
	items := make([][2]*ast.Term, 0, len(parts))
	for _, p := range parts {
		switch p := p.(type) {
		case [2]*ast.Term:
			items = append(items, p)
		case member:
			t, err := mapTerm(p.value)
			if err != nil {
				return nil, err
			}
			items = append(items, [2]*ast.Term{ast.StringTerm(p.key), t})
		}
	}
	return ast.NewObject(items...), nil
}

// mapTerm converts a JSON object; a nil map is the empty object, so a rule
// reading a member of it finds it undefined rather than tripping on null.
func mapTerm(m map[string]any) (*ast.Term, error) {
	if m == nil {
		return ast.ObjectTerm(), nil
	}
	v, err := ast.InterfaceToValue(m)
	if err != nil {
		return nil, err
	}
	return ast.NewTerm(v), nil
}
