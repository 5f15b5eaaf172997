// Package facts holds the policy facts every deployment can resolve: when
// a call is made in its organization's time zone, what its run has spent,
// who calls and for whom, what the tool is tagged and classified as, and
// which of its arguments are sensitive. A tool declares the facts its
// organization's rules read (policy_facts); the invoker resolves them,
// each under its deadline, before the decision.
//
// Facts a deployment's own handlers need (an order's account, a
// customer's tier) are resolvers registered beside the handlers in Go
// (handler.Registry.RegisterFact); these are only the ones the platform
// itself knows.
package facts

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/schema"
)

// The built-in facts' names.
const (
	// OrgTime is the moment of the decision in the organization's time
	// zone: {"time": RFC 3339, "zone", "hour" 0-23, "weekday" 0 (Sunday)
	// to 6, "date": YYYY-MM-DD}.
	OrgTime = "org_time"
	// RunSpendCents is what the call's run tree has spent so far, in
	// cents (0 for a call outside a run).
	RunSpendCents = "run_spend_cents"
	// AgentAttributes describes the calling agent: {"id", "key", "tenant",
	// "roles", "attributes"} (attributes from its token's claims).
	AgentAttributes = "agent_attributes"
	// UserAttributes describes the person the call acts for: {"id",
	// "roles", "groups", "manager", "attributes"}, or null when the agent
	// acts alone.
	UserAttributes = "user_attributes"
	// ToolTags are the tool's tags.
	ToolTags = "tool_tags"
	// ToolClassification is the data classification of what the tool
	// touches ("" when it declares none).
	ToolClassification = "tool_classification"
	// SensitiveArguments lists the pointers of the arguments the call
	// holds that the input schema marks x-sensitive: a rule learns that a
	// card number was given, never the number.
	SensitiveArguments = "sensitive_arguments"
)

// Names answers the built-in facts' names, sorted.
func Names() []string {
	n := []string{OrgTime, RunSpendCents, AgentAttributes, UserAttributes, ToolTags, ToolClassification, SensitiveArguments}
	slices.Sort(n)
	return n
}

// Spend answers what a run tree has spent (the meter's usage store).
type Spend interface {
	RunTreeCost(ctx context.Context, org, rootRunID string) (int64, error)
}

// Config is what the built-in resolvers read.
type Config struct {
	// Zone answers an organization's time zone (the one its policy
	// bundle reads time in, so a fact and a rule never disagree on the
	// hour); nil, or a nil answer, is UTC. An error is the fact's.
	Zone func(ctx context.Context, org string) (*time.Location, error)
	// Spend reads a run tree's spend; without it run_spend_cents is not
	// registered.
	Spend Spend
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Builtin answers the built-in resolvers over cfg, to be merged with the
// deployment's own into one policy.Facts.
func Builtin(cfg Config) policy.Facts {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	b := &builtin{cfg: cfg, now: now}
	f := policy.Facts{
		OrgTime:            b.orgTime,
		AgentAttributes:    agentAttributes,
		UserAttributes:     userAttributes,
		ToolTags:           toolTags,
		ToolClassification: toolClassification,
		SensitiveArguments: b.sensitiveArguments,
	}
	if cfg.Spend != nil {
		f[RunSpendCents] = b.runSpend
	}
	return f
}

type builtin struct {
	cfg Config
	now func() time.Time
	// sensitive caches each input schema's x-sensitive pointers by its
	// hash: compiling a schema on every call would cost more than the
	// call.
	sensitive sync.Map // schema hash -> []string
}

func (b *builtin) orgTime(ctx context.Context, inv *toolplane.Invocation, _ *toolplane.Definition, _ any) (any, error) {
	loc := time.UTC
	if b.cfg.Zone != nil {
		z, err := b.cfg.Zone(ctx, inv.OrganizationID)
		if err != nil {
			return nil, fmt.Errorf("time zone of %s: %w", inv.OrganizationID, err)
		}
		if z != nil {
			loc = z
		}
	}
	t := b.now().In(loc)
	return map[string]any{
		"time": t.Format(time.RFC3339), "zone": loc.String(), "hour": t.Hour(),
		"weekday": int(t.Weekday()), "date": t.Format(time.DateOnly),
	}, nil
}

func (b *builtin) runSpend(ctx context.Context, inv *toolplane.Invocation, _ *toolplane.Definition, _ any) (any, error) {
	root := inv.EffectiveRootRunID()
	if root == "" {
		return int64(0), nil
	}
	spent, err := b.cfg.Spend.RunTreeCost(ctx, inv.OrganizationID, root)
	if err != nil {
		return nil, fmt.Errorf("spend of run %s: %w", root, err)
	}
	return spent, nil
}

func agentAttributes(_ context.Context, inv *toolplane.Invocation, _ *toolplane.Definition, _ any) (any, error) {
	out := map[string]any{"id": inv.AgentID, "key": inv.CredentialID, "tenant": inv.TenantID,
		"roles": []any{}, "attributes": attributes(inv.AgentAttributes)}
	if c := inv.Credential; c != nil {
		out["roles"] = strings(c.Roles)
	} else if inv.AgentRoles != nil {
		out["roles"] = strings(inv.AgentRoles)
	}
	return out, nil
}

func userAttributes(_ context.Context, inv *toolplane.Invocation, _ *toolplane.Definition, _ any) (any, error) {
	if inv.UserID == "" {
		return nil, nil
	}
	out := map[string]any{"id": inv.UserID, "roles": []any{}, "groups": []any{}, "manager": "", "attributes": map[string]any{}}
	if u := inv.User; u != nil {
		out["roles"], out["groups"], out["manager"], out["attributes"] = strings(u.Roles), strings(u.Groups), u.Manager, attributes(u.Attributes)
	}
	return out, nil
}

func toolTags(_ context.Context, _ *toolplane.Invocation, d *toolplane.Definition, _ any) (any, error) {
	return strings(d.Tags), nil
}

func toolClassification(_ context.Context, _ *toolplane.Invocation, d *toolplane.Definition, _ any) (any, error) {
	return d.Classification, nil
}

func (b *builtin) sensitiveArguments(_ context.Context, _ *toolplane.Invocation, d *toolplane.Definition, args any) (any, error) {
	key := d.SchemaHash
	if key == "" {
		key = d.Name + "@" + d.Version + "\x00" + string(d.InputSchema)
	}
	paths, ok := b.sensitive.Load(key)
	if !ok {
		s, err := schema.Compile(d.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("input schema of %s: %w", d.Name, err)
		}
		paths, _ = b.sensitive.LoadOrStore(key, s.Sensitive())
	}
	out := []any{}
	for _, p := range paths.([]string) {
		if schema.Holds(args, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// strings answers a list as plain JSON values, never null: a rule reads
// an empty list the same way in every engine.
func strings(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

func attributes(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
