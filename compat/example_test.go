package compat_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/compat"
)

func ExampleDiff() {
	before := json.RawMessage(`{"type":"object","required":["amount"],"properties":{
		"amount":{"type":"integer","maximum":100},
		"reason":{"enum":["defective","other"]}}}`)
	after := json.RawMessage(`{"type":"object","required":["amount"],"properties":{
		"amount":{"type":"integer","maximum":50},
		"reason":{"enum":["defective","other","late"]},
		"note":{"type":"string"}}}`)
	changes, err := compat.Diff(before, after, compat.SideInput)
	if err != nil {
		panic(err)
	}
	for _, c := range changes {
		fmt.Println(c)
	}
	// Output:
	// input amount: maximum lowered from 100 to 50 — needs MAJOR
	// input note: added as optional — needs MINOR
	// input reason: enum values added: "late" — needs MINOR
}

func ExampleCheck() {
	published := &toolplane.Definition{
		Name:         "payments.refund_order",
		Version:      "2.1.0",
		InputSchema:  json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"refund_id":{"type":"string"}}}`),
	}
	next := *published
	next.Version = "2.2.0"
	next.InputSchema = json.RawMessage(`{"type":"object","required":["order_id","amount"],"properties":{"order_id":{"type":"string"},"amount":{"type":"integer"}}}`)

	err := compat.Check(published, &next)
	var v *compat.Violation
	if errors.As(err, &v) {
		fmt.Println(err)
	}
	// Output:
	// payments.refund_order 2.1.0 → 2.2.0 declares a MINOR bump, but 1 change(s) need MAJOR:
	//   input amount: added as required — needs MAJOR (declared MINOR)
	// publish as 3.0.0, or revert these changes
}
