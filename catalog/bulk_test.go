package catalog_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/catalog"
)

// A bulk review decides each version on its own: every version the
// selection reaches is approved and recorded with its own change, a
// version its reviewer published is refused to that reviewer (the four
// eyes hold per version), and a version not in review, missing or of
// another organization is refused, without stopping the others.
func TestReviewManyDecidesAndRecordsEachVersionOnItsOwn(t *testing.T) {
	t.Parallel()
	billing := func(name string) toolplane.Definition {
		return getOrder("1.0.0", func(d *toolplane.Definition) { d.Name, d.Connection = name, "billing" })
	}
	tests := []struct {
		name string
		sel  catalog.Selection
		// want maps each version decided to "" (approved) or the error
		// its refusal wraps.
		want map[string]error
	}{
		{"by connection", catalog.Selection{Connection: "billing"}, map[string]error{
			"payments.invoice_0@1.0.0": nil, "payments.invoice_1@1.0.0": nil, "payments.invoice_2@1.0.0": nil,
			"payments.invoice_3@1.0.0": nil, "payments.own@1.0.0": toolplane.ErrForbidden}},
		{"by publisher", catalog.Selection{PublishedBy: "olga"}, map[string]error{
			"payments.invoice_0@1.0.0": nil, "payments.invoice_1@1.0.0": nil, "payments.invoice_2@1.0.0": nil,
			"payments.invoice_3@1.0.0": nil, "payments.get_order@1.0.0": nil}},
		{"by the reviewer's own publisher name", catalog.Selection{PublishedBy: "ada"}, map[string]error{
			"payments.own@1.0.0": toolplane.ErrForbidden}},
		{"listed", catalog.Selection{Versions: []catalog.Ref{
			{"payments.invoice_1", "1.0.0"}, {"payments.own", "1.0.0"}, {"payments.invoice_1", "1.0.0"},
			{"payments.refund_order", "1.0.0"}, {"payments.nope", "1.0.0"}, {"payments.other_org", "1.0.0"},
		}}, map[string]error{
			"payments.invoice_1@1.0.0": nil, "payments.own@1.0.0": toolplane.ErrForbidden, "payments.refund_order@1.0.0": catalog.ErrTransition,
			"payments.nope@1.0.0": toolplane.ErrNotFound, "payments.other_org@1.0.0": toolplane.ErrNotFound}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.seedActive(t) // payments.refund_order 1.0.0, active
			// Reviewed again: a destructive tool always is.
			destructive := func(d toolplane.Definition) toolplane.Definition {
				d.Effect, d.Annotations.Destructive = toolplane.EffectWrite, true
				no := false
				d.Repeatable = &no
				return d
			}
			for i := range 4 {
				if p, err := f.svc.Publish(f.ctx, destructive(billing(fmt.Sprintf("payments.invoice_%d", i))), owner); err != nil || p.Version.State != toolplane.StateInReview {
					t.Fatalf("publish: %v", err)
				}
			}
			if _, err := f.svc.Publish(f.ctx, destructive(getOrder("1.0.0")), owner); err != nil {
				t.Fatal(err)
			}
			// The reviewer's own version (platform_admin holds every role).
			if _, err := f.svc.Publish(f.ctx, destructive(billing("payments.own")), admin); err != nil {
				t.Fatal(err)
			}
			// Another organization's version in review.
			other := person("olga", "tool_owner:payments")
			other.OrganizationID = "org-b"
			if _, err := f.svc.Publish(f.ctx, billing("payments.other_org"), other); err != nil {
				t.Fatal(err)
			}

			ds, err := f.svc.ReviewMany(f.ctx, tt.sel, true, "reviewed together", admin)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]error{}
			for _, d := range ds {
				ref := d.Name + "@" + d.Ref.Version
				if _, dup := got[ref]; dup {
					t.Errorf("%s decided twice", ref)
				}
				got[ref] = d.Err
				if d.Err == nil && (d.Result == nil || d.Result.State != toolplane.StateActive || d.Result.ReviewedBy != "ada") {
					t.Errorf("%s: %+v", ref, d.Result)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("decided %v, want %v", got, tt.want)
			}
			for ref, want := range tt.want {
				err, ok := got[ref]
				if !ok || (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
					t.Errorf("%s: %v (decided %v), want %v", ref, err, ok, want)
				}
				if want == nil {
					cs, _, err := f.svc.Changes(f.ctx, "version.approve", ref, "", 10, admin)
					if err != nil || len(cs) != 1 || cs[0].Actor != "ada" {
						t.Errorf("%s: change log %v %v", ref, cs, err)
					}
					if name, _, _ := strings.Cut(ref, "@"); !servedIn(f, name) {
						t.Errorf("%s approved but not served", ref)
					}
				}
			}
			// The refused own version is still in review, unrecorded.
			if v, _ := f.store.GetToolVersion(f.ctx, "default", "payments.own", "1.0.0"); v.State != toolplane.StateInReview {
				t.Errorf("the reviewer's own version is %s", v.State)
			}
			if cs, _, _ := f.svc.Changes(f.ctx, "version.approve", "payments.own@1.0.0", "", 10, admin); len(cs) != 0 {
				t.Errorf("a refused approval is recorded: %v", cs)
			}
		})
	}
}

// servedIn reports whether the registry serves name to the default
// organization.
func servedIn(f *fixture, name string) bool {
	_, ok := f.reg.Get("default", name)
	return ok
}

// A bulk review is a platform_admin's, a rejection needs its note, and a
// selection names versions or a filter, within the bound.
func TestReviewManyRefusesTheRequestAsAWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	many := make([]catalog.Ref, catalog.MaxBulkReview+1)
	for i := range many {
		many[i] = catalog.Ref{Name: fmt.Sprintf("payments.t%d", i), Version: "1.0.0"}
	}
	tests := []struct {
		name    string
		sel     catalog.Selection
		approve bool
		note    string
		by      *toolplane.Credential
		want    error
	}{
		{"not a platform_admin", catalog.Selection{PublishedBy: "olga"}, true, "", owner, toolplane.ErrForbidden},
		{"a rejection without a note", catalog.Selection{PublishedBy: "olga"}, false, " ", admin, toolplane.ErrInvalid},
		{"nothing named", catalog.Selection{}, true, "", admin, toolplane.ErrInvalid},
		{"versions and a filter", catalog.Selection{Versions: []catalog.Ref{{"payments.x", "1.0.0"}}, PublishedBy: "olga"}, true, "", admin, toolplane.ErrInvalid},
		{"a version without its name", catalog.Selection{Versions: []catalog.Ref{{"", "1.0.0"}}}, true, "", admin, toolplane.ErrInvalid},
		{"past the bound", catalog.Selection{Versions: many}, true, "", admin, toolplane.ErrInvalid},
	}
	for _, tt := range tests {
		if ds, err := f.svc.ReviewMany(f.ctx, tt.sel, tt.approve, tt.note, tt.by); !errors.Is(err, tt.want) || ds != nil {
			t.Errorf("%s: %v %v, want %v", tt.name, ds, err, tt.want)
		}
	}
}
