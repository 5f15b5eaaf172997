package webhook_test

import (
	"context"
	"fmt"
	"time"

	"github.com/toolplane/toolplane/webhook"
)

// A receiver checks a callback with the organization's secret; during a
// rotation it may hold both the old and the new one.
func ExampleVerifier() {
	secret := []byte("tpwhs_0000000000000000000000000000000000000000000000000000000000000000")
	body := []byte(`{"invocation_id":"inv_1","status":"succeeded"}`)
	sent := time.Unix(1_767_225_600, 0)

	// What toolplane sends.
	h := webhook.Headers([][]byte{secret}, "dlv_1", body, sent)

	ctx := context.Background()
	// What the receiver does, its clock a minute later.
	v, err := webhook.NewVerifier(webhook.Config{
		Secrets: [][]byte{secret},
		Now:     func() time.Time { return sent.Add(time.Minute) },
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verify(ctx, h, body) == nil)
	err = v.Verify(ctx, h, body)
	fmt.Println(webhook.CheckName(err))
	h.Set(webhook.HeaderTimestamp, "1767225601")
	fmt.Println(webhook.CheckName(v.Verify(ctx, h, body)))
	// Output:
	// true
	// replay
	// signature
}
