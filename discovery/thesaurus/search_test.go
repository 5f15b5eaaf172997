package thesaurus_test

import (
	"context"
	"slices"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/discovery/thesaurus"
	"github.com/toolplane/toolplane/internal/demo"
	"github.com/toolplane/toolplane/registry"
)

// TestSearchFindsParaphrases runs the engine over a small catalogue with
// queries that share no analysed word with the tool they mean: found
// with the shipped thesaurus, not without it.
func TestSearchFindsParaphrases(t *testing.T) {
	t.Parallel()
	tools := []struct{ model, desc string }{
		{"refund_order", "Give a payment back to the buyer of an order."},
		{"create_ticket", "Open a new support ticket."},
		{"delete_bucket", "Delete an object storage bucket and its files."},
		{"list_employees", "List the employees of the company."},
		{"book_meeting", "Book a meeting in a calendar."},
		{"rollout_service", "Deploy a new version of a service to production."},
		{"send_email", "Send an email to an address."},
		{"rotate_api_key", "Rotate an API key."},
		{"get_weather", "Current weather for a city."},
		{"restart_server", "Restart a virtual machine."},
		{"get_oncall", "Show who is on call for a rotation."},
		{"mute_monitor", "Mute a monitor's notifications for a while."},
		{"terminate_employee", "Record that an employee has left the company."},
	}
	var cat []*registry.Tool
	text := map[string][]string{}
	for _, tl := range tools {
		cat = append(cat, &registry.Tool{
			Def:   toolplane.Definition{Name: "acme." + tl.model, Description: tl.desc},
			Model: tl.model, State: toolplane.StateActive,
		})
		text[tl.model] = append(discovery.Terms(tl.model), discovery.Terms(tl.desc)...)
	}
	cases := []struct{ query, want string }{
		{"reimburse the customer", "refund_order"},
		{"file an incident", "create_ticket"},
		{"wipe blob store", "delete_bucket"},
		{"staff directory", "list_employees"},
		{"schedule an appointment", "book_meeting"},
		{"ship release to prod", "rollout_service"},
		{"mail a message", "send_email"},
		{"regenerate credentials", "rotate_api_key"},
		{"reboot the vm", "restart_server"},
		{"erase a container", "delete_bucket"},
		{"raise an issue", "create_ticket"},
		{"is it raining", "get_weather"},
		{"reserve a slot", "book_meeting"},
		{"renew the token", "rotate_api_key"},
		{"push a release", "rollout_service"},
		{"who holds the beeper", "get_oncall"},
		{"silence the alarm", "mute_monitor"},
		{"offboard a worker", "terminate_employee"},
		{"nuke the blob store", "delete_bucket"},
		{"bounce the box", "restart_server"},
	}
	with := discovery.New(discovery.Options{Thesaurus: thesaurus.Default()})
	with.Rebuild(cat)
	without := discovery.New(discovery.Options{})
	without.Rebuild(cat)
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			t.Parallel()
			for _, q := range discovery.Terms(c.query) {
				if slices.Contains(text[c.want], q) {
					t.Fatalf("query word %q is in %s's text; the case tests nothing", q, c.want)
				}
			}
			res, err := with.Search(context.Background(), "org", cat, discovery.Query{Text: c.query})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Matches) == 0 || res.Matches[0].Model != c.want {
				t.Errorf("with the thesaurus, %q found %v (no good match %v), want %s first", c.query, models(res), res.NoGoodMatch, c.want)
			}
			res, err = without.Search(context.Background(), "org", cat, discovery.Query{Text: c.query})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Matches) > 0 && res.Matches[0].Model == c.want {
				t.Errorf("without a thesaurus, %q found %s too", c.query, c.want)
			}
		})
	}
}

func models(r *discovery.Results) []string {
	var out []string
	for _, m := range r.Matches {
		out = append(out, m.Model)
	}
	return out
}

// The README's query meets demo.refund_order, which shares no word of it,
// in the demo's catalogue of four tools.
func TestTheDemoRefundFoundByItsParaphrase(t *testing.T) {
	t.Parallel()
	defs, _, err := demo.New().Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]bool{}
	for _, d := range defs {
		handlers[d.Binding.Handler.Key] = d.ApprovalPreview
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: registry.Static{Handlers: handlers,
		FactResolvers: map[string]bool{demo.OrderAccountFact: true}}})
	if err != nil {
		t.Fatal(err)
	}
	x := discovery.New(discovery.Options{Thesaurus: thesaurus.Default()})
	x.Follow(reg)
	res, err := x.Search(context.Background(), "", reg.Tools(""), discovery.Query{Text: "give a customer their money back"})
	if err != nil {
		t.Fatal(err)
	}
	if res.NoGoodMatch || len(res.Matches) == 0 || res.Matches[0].Name != "demo.refund_order" {
		t.Fatalf("got %+v", res)
	}
}
