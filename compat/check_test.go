package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// TestCheckRules walks every row of the §6.4 table, in both directions:
// each change is accepted at the bump it needs and refused one below it,
// and so is the change that undoes it.
func TestCheckRules(t *testing.T) {
	t.Parallel()
	amount := func(max string) string {
		return obj([]string{"amount"}, `"amount":{"type":"integer","minimum":1,"maximum":`+max+`}`)
	}
	enum := func(required []string, vals string) string {
		return obj(required, `"status":{"type":"string","enum":[`+vals+`]}`)
	}
	rows := []struct {
		name          string
		side          Side
		a, b          string
		forward, back Bump
	}{
		{"add optional input field", SideInput, amount("100"), obj([]string{"amount"}, `"amount":{"type":"integer","minimum":1,"maximum":100}`, `"note":{"type":"string"}`), Minor, Major},
		{"add required input field", SideInput, amount("100"), obj([]string{"amount", "currency"}, `"amount":{"type":"integer","minimum":1,"maximum":100}`, `"currency":{"type":"string"}`), Major, Major},
		{"rename input field", SideInput, amount("100"), obj([]string{"cents"}, `"cents":{"type":"integer","minimum":1,"maximum":100}`), Major, Major},
		{"rename output field", SideOutput, obj(nil, `"id":{"type":"string"}`), obj(nil, `"ident":{"type":"string"}`), Major, Major},
		{"raise input maximum", SideInput, amount("100"), amount("500"), Minor, Major},
		{"add input enum values", SideInput, enum(nil, `"a"`), enum(nil, `"a","b"`), Minor, Major},
		{"add optional output field", SideOutput, obj(nil, `"id":{"type":"string"}`), obj(nil, `"id":{"type":"string"}`, `"url":{"type":"string"}`), Minor, Major},
		{"add required output field", SideOutput, obj(nil, `"id":{"type":"string"}`), obj([]string{"url"}, `"id":{"type":"string"}`, `"url":{"type":"string"}`), Minor, Major},
		{"integer to number on input", SideInput, obj(nil, `"n":{"type":"integer"}`), obj(nil, `"n":{"type":"number"}`), Major, Major},
		{"integer to number on output", SideOutput, obj(nil, `"n":{"type":"integer"}`), obj(nil, `"n":{"type":"number"}`), Major, Major},
		{"widen output enum", SideOutput, enum([]string{"status"}, `"a"`), enum([]string{"status"}, `"a","b"`), Major, Minor},
		{"output field no longer required", SideOutput, enum([]string{"status"}, `"a"`), enum(nil, `"a"`), Major, Minor},
		{"description only", SideInput, obj(nil, `"n":{"type":"integer","description":"a"}`), obj(nil, `"n":{"type":"integer","description":"b"}`), Patch, Patch},
	}
	versions := []struct {
		to       string
		declared Bump
	}{{"2.1.1", Patch}, {"2.2.0", Minor}, {"3.0.0", Major}}
	for _, row := range rows {
		for _, dir := range []struct {
			name     string
			old, new string
			need     Bump
		}{{"forward", row.a, row.b, row.forward}, {"back", row.b, row.a, row.back}} {
			for _, v := range versions {
				t.Run(fmt.Sprintf("%s/%s/%s", row.name, dir.name, v.declared), func(t *testing.T) {
					t.Parallel()
					old, next := refundOrder(), refundOrder()
					next.Version = v.to
					switch row.side {
					case SideInput:
						old.InputSchema, next.InputSchema = json.RawMessage(dir.old), json.RawMessage(dir.new)
					case SideOutput:
						old.OutputSchema, next.OutputSchema = json.RawMessage(dir.old), json.RawMessage(dir.new)
					}
					err := Check(old, next)
					if v.declared >= dir.need {
						if err != nil {
							t.Fatalf("declared %v, need %v: refused: %v", v.declared, dir.need, err)
						}
						return
					}
					var vio *Violation
					if !errors.As(err, &vio) {
						t.Fatalf("declared %v, need %v: err %v, want a *Violation", v.declared, dir.need, err)
					}
					if vio.Declared != v.declared || vio.Required != dir.need || len(vio.Changes) == 0 {
						t.Fatalf("violation %+v", vio)
					}
					for _, c := range vio.Changes {
						if c.Bump <= v.declared {
							t.Errorf("listed %v, which the declared bump allows", c)
						}
					}
					if want := map[Bump]string{Minor: "2.2.0", Major: "3.0.0"}[dir.need]; vio.Suggested != want {
						t.Errorf("suggested %s, want %s", vio.Suggested, want)
					}
				})
			}
		}
	}
}

func TestCheckMessage(t *testing.T) {
	t.Parallel()
	old, next := refundOrder(), refundOrder()
	next.Version = "2.2.0"
	next.InputSchema = json.RawMessage(obj([]string{"order_id", "amount", "currency"}, `"order_id":{"type":"string","pattern":"^ord_"}`, `"amount":{"type":"integer","minimum":1,"maximum":50}`, `"reason":{"type":"string","enum":["defective","other"]}`, `"currency":{"type":"string"}`))
	next.Effect = toolplane.EffectSend
	next.Description = "Refund an order."
	err := Check(old, next)
	want := `payments.refund_order 2.1.0 → 2.2.0 declares a MINOR bump, but 3 change(s) need MAJOR:
  input amount: maximum lowered from 100 to 50 — needs MAJOR (declared MINOR)
  input currency: added as required — needs MAJOR (declared MINOR)
  definition effect: changed from "write" to "send": idempotency claims, retries and policies follow the effect — needs MAJOR (declared MINOR)
publish as 3.0.0, or revert these changes`
	if err == nil || err.Error() != want {
		t.Fatalf("message:\n%v\nwant:\n%s", err, want)
	}
}

func TestCheckVersions(t *testing.T) {
	t.Parallel()
	breaking := func(d *toolplane.Definition) {
		d.InputSchema = json.RawMessage(obj([]string{"x"}, `"x":{"type":"string"}`))
	}
	minor := func(d *toolplane.Definition) { d.Annotations.Idempotent = false }
	cases := []struct {
		name     string
		from, to string
		change   func(*toolplane.Definition)
		want     error // nil, a sentinel, or errViolation
	}{
		{"same version", "2.1.0", "2.1.0", nil, ErrVersionNotGreater},
		{"lower version", "2.1.0", "2.0.9", nil, ErrVersionNotGreater},
		{"build metadata only", "2.1.0+a", "2.1.0+b", nil, ErrVersionNotGreater},
		{"release to its prerelease", "2.1.0", "2.1.0-rc.1", nil, ErrVersionNotGreater},
		{"old invalid", "2.1", "2.2.0", nil, ErrInvalidVersion},
		{"new invalid", "2.1.0", "v2.2.0", nil, ErrInvalidVersion},
		{"patch with nothing", "2.1.0", "2.1.1", nil, nil},
		{"build metadata on a bump", "2.1.0+a", "2.1.1+b", nil, nil},
		{"major prereleases may break", "3.0.0-rc.1", "3.0.0-rc.2", breaking, nil},
		{"major release from its prerelease may break", "3.0.0-rc.2", "3.0.0", breaking, nil},
		{"minor prereleases may not break", "2.2.0-rc.1", "2.2.0-rc.2", breaking, errViolation},
		{"minor prerelease takes a minor change", "2.2.0-rc.1", "2.2.0", minor, nil},
		{"patch prerelease refuses a minor change", "2.1.1-rc.1", "2.1.1", minor, errViolation},
		{"prerelease of the next major", "2.1.0", "3.0.0-alpha", breaking, nil},
		{"major accepts anything", "2.1.0", "3.0.0", breaking, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old, next := refundOrder(), refundOrder()
			old.Version, next.Version = tc.from, tc.to
			if tc.change != nil {
				tc.change(next)
			}
			err := Check(old, next)
			var vio *Violation
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == errViolation && !errors.As(err, &vio):
				t.Fatalf("err %v, want a *Violation", err)
			case tc.want != nil && tc.want != errViolation && !errors.Is(err, tc.want):
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
	if err := Check(nil, refundOrder()); err == nil {
		t.Error("Check(nil, d) must fail")
	}
	renamed := refundOrder()
	renamed.Name, renamed.Version = "payments.refund", "2.2.0"
	if err := Check(refundOrder(), renamed); err == nil || !strings.Contains(err.Error(), "different tools") {
		t.Errorf("rename: %v", err)
	}
}

var errViolation = errors.New("violation")

func TestViolationMixedNeeds(t *testing.T) {
	t.Parallel()
	old, next := refundOrder(), refundOrder()
	next.Version = "2.1.1"
	next.Annotations.Idempotent = false
	next.Effect = toolplane.EffectSend
	err := Check(old, next)
	var v *Violation
	if !errors.As(err, &v) {
		t.Fatalf("err %v, want a *Violation", err)
	}
	if !strings.Contains(err.Error(), "declares a PATCH bump, but 2 change(s) need more, up to MAJOR:") ||
		!strings.Contains(err.Error(), "definition annotations.idempotent: changed from true to false — needs MINOR (declared PATCH)") ||
		v.Suggested != "3.0.0" {
		t.Fatalf("message:\n%v", err)
	}
}
