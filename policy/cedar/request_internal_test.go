package cedar

import (
	"reflect"
	"testing"

	cedargo "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/x/exp/schema/resolved"

	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/policytest"
)

// TestMapRequestMapsEveryField: a field added to policy.Request that the
// Cedar entities and request do not carry fails here. Each open part's
// schema declares the member FilledRequest sets, so that its value is
// converted.
func TestMapRequestMapsEveryField(t *testing.T) {
	t.Parallel()
	key := resolved.RecordType{"key": resolved.Attribute{Type: resolved.StringType{}}}
	sh := &shapes{arguments: key, facts: key, agentAttributes: key, userAttributes: key}
	type mapped struct {
		entities cedargo.EntityMap
		request  cedargo.Request
	}
	policytest.MapsEveryField(t, func(r *policy.Request) (mapped, error) {
		e, req, err := mapRequest(r, sh)
		return mapped{e, req}, err
	}, func(a, b mapped) bool { return reflect.DeepEqual(a, b) })
}
