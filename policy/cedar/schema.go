package cedar

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	sast "github.com/cedar-policy/cedar-go/x/exp/schema/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema/resolved"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"
)

// baseSchema is the Request document as Cedar sees it. The four open parts
// (the arguments, the facts, the agent's and the user's attributes) differ
// per deployment, so they are common types a bundle declares in its
// schema.cedarschema; each one a bundle leaves out is the empty record, so
// a rule reading any attribute of it is refused.
const baseSchema = `
entity Role;
entity Group;
entity Team;
entity Agent in [Role, Team] {
	key: String,
	roles: Set<String>,
	team: String,
	tenant: String,
	attributes: AgentAttributes,
};
entity User in [Role, Group] {
	roles: Set<String>,
	groups: Set<String>,
	manager: String,
	attributes: UserAttributes,
};
entity Tool {
	name: String,
	version: String,
	effect: String,
	destructive: Bool,
	read_only: Bool,
	tags: Set<String>,
	classification: String,
	owner: String,
	sensitive: Set<String>,
};
action call appliesTo {
	principal: [Agent],
	resource: [Tool],
	context: {
		arguments: Arguments,
		facts: Facts,
		user?: User,
		time: datetime,
		hour: Long,
		weekday: Long,
		run_cost_cents: Long,
		source: String,
	},
};
`

// openTypes are the common types a bundle may declare.
var openTypes = []string{"Arguments", "Facts", "AgentAttributes", "UserAttributes"}

// SchemaFile is the bundle file that declares the open parts of the
// Request.
const SchemaFile = "schema.cedarschema"

// checker is what a bundle's policies are checked against: Cedar's
// validator, and every attribute name the schema declares anywhere.
type checker struct {
	validator *validate.Validator
	declared  map[types.String]bool
	// shapes are the resolved types of the open parts: what a decision
	// converts of them.
	shapes shapes
}

// check validates one policy. Beside Cedar's validation it refuses a `has`
// test of an attribute declared nowhere: the validator types such a test
// false and accepts it, so a misspelt attribute would make a forbid that
// never forbids (`context.arguments has amont && ...`).
func (c *checker) check(id string, p *xast.Policy) error {
	if err := c.validator.Policy(id, p); err != nil {
		return err
	}
	var unknown []string
	for _, cond := range p.Conditions {
		xast.Inspect(xast.NewNode(cond.Body), func(n xast.IsNode) bool {
			if h, ok := n.(xast.NodeTypeHas); ok && !c.declared[h.Value] {
				unknown = append(unknown, string(h.Value))
			}
			return true
		})
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("for policy `%s`, `has %s` tests an attribute the Request and the bundle's schema never declare: the test can never hold", id, strings.Join(slices.Compact(unknown), "`, `has "))
	}
	return nil
}

// attributeNames adds every attribute name a type declares, at any depth.
func attributeNames(t sast.IsType, into map[types.String]bool) {
	switch t := t.(type) {
	case sast.RecordType:
		for name, a := range t {
			into[name] = true
			attributeNames(a.Type, into)
		}
	case sast.SetType:
		attributeNames(t.Element, into)
	}
}

// validator builds the checker of a bundle from its schema file ("" when
// the bundle has none). The bundle's file may declare common types only:
// the entities and the action are the Request's, fixed by toolplane.
func validator(bundleSchema string) (*checker, error) {
	declared := map[string]bool{}
	if bundleSchema != "" {
		var s schema.Schema
		s.SetFilename(SchemaFile)
		if err := s.UnmarshalCedar([]byte(bundleSchema)); err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		a := s.AST()
		if len(a.Entities) > 0 || len(a.Enums) > 0 || len(a.Actions) > 0 || len(a.Namespaces) > 0 {
			return nil, fmt.Errorf("schema declares entities, actions or namespaces; a bundle may declare only the types %s", strings.Join(openTypes, ", "))
		}
		for name := range a.CommonTypes {
			declared[string(name)] = true
		}
	}
	var text strings.Builder
	text.WriteString(baseSchema)
	text.WriteString(bundleSchema)
	text.WriteString("\n")
	for _, name := range openTypes {
		if !declared[name] {
			fmt.Fprintf(&text, "type %s = {};\n", name)
		}
	}
	var s schema.Schema
	s.SetFilename(SchemaFile)
	if err := s.UnmarshalCedar([]byte(text.String())); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	for name := range s.AST().CommonTypes {
		if !slices.Contains(openTypes, string(name)) && !declared[string(name)] {
			return nil, fmt.Errorf("schema: unexpected type %s", name)
		}
	}
	r, err := s.Resolve()
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	full := s.AST()
	names := map[types.String]bool{}
	for _, e := range full.Entities {
		attributeNames(e.Shape, names)
	}
	for _, act := range full.Actions {
		if act.AppliesTo != nil {
			attributeNames(act.AppliesTo.Context, names)
		}
	}
	for _, ct := range full.CommonTypes {
		attributeNames(ct.Type, names)
	}
	sh, err := openShapes(r)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return &checker{validator: validate.New(r), declared: names, shapes: sh}, nil
}

// openShapes reads the resolved types of the Request's open parts: the
// context's arguments and facts, and the agent's and the user's
// attributes.
func openShapes(r *resolved.Schema) (shapes, error) {
	var sh shapes
	call, ok := r.Actions[actionCall]
	if !ok || call.AppliesTo == nil {
		return sh, fmt.Errorf("no action %s", actionCall)
	}
	for _, p := range []struct {
		name  string
		into  *resolved.RecordType
		attrs resolved.RecordType
	}{
		{"arguments", &sh.arguments, call.AppliesTo.Context},
		{"facts", &sh.facts, call.AppliesTo.Context},
		{"attributes", &sh.agentAttributes, r.Entities[typeAgent].Shape},
		{"attributes", &sh.userAttributes, r.Entities[typeUser].Shape},
	} {
		rt, ok := p.attrs[types.String(p.name)].Type.(resolved.RecordType)
		if !ok {
			return sh, fmt.Errorf("%s is not a record", p.name)
		}
		*p.into = rt
	}
	return sh, nil
}
