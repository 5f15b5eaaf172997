package cedar

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cedar-policy/cedar-go/x/exp/schema"
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

// validator builds the validator of a bundle from its schema file ("" when
// the bundle has none). The bundle's file may declare common types only:
// the entities and the action are the Request's, fixed by toolplane.
func validator(bundleSchema string) (*validate.Validator, error) {
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
	return validate.New(r), nil
}
