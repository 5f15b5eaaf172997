package notify_test

import (
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// The secrets every test configures: each must never show in an answer,
// a log line or a recorded error.
const (
	hmacKey  = "whsec-0123456789abcdef0123456789abcdef"
	password = "smtp-pass-5ecr3t-never-shown"
)

var admin = &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "root@example.com",
	Roles: []string{toolplane.RolePlatformAdmin}}

// testReceivers is the operator's switch the tests set: their receivers
// and mail servers listen on loopback, which egress refuses otherwise.
var testReceivers = []string{"127.0.0.0/8"}

func keyring(t testing.TB) *secret.Keyring {
	t.Helper()
	b := make([]byte, secret.KeySize)
	rand.Read(b)
	k, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newService(t testing.TB) (*notify.Service, *sqlite.Store) {
	t.Helper()
	st := sqlitetest.New(t)
	s, err := notify.New(notify.Config{Store: st, Keys: keyring(t), PublicURL: "https://toolplane.example", Timeout: 2 * time.Second,
		AllowCIDRs: testReceivers})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

// fileApproval stores a pending approval of org-1 whose tool, preview and
// arguments carry what outside text may: markup, control characters and
// a credential.
func fileApproval(t testing.TB, st *sqlite.Store, group string) *toolplane.Approval {
	t.Helper()
	now := time.Now()
	a := &toolplane.Approval{ID: toolplane.NewID("apr_"), OrganizationID: "org-1", RunID: "run-1", StepPath: "s/1",
		Tool: "payments.refund_order", ToolVersion: "1.2.0", Key: "k-" + rand.Text(), ArgumentsHash: "h",
		Arguments:   []byte(`{"order":"ord_1","amount_cents":1250,"api_key":"sk_live_abcdefghijklmnop"}`),
		Invocation:  []byte(`{"AgentID":"agent-billing","UserID":"ada@example.com","RunID":"run-1"}`),
		PrincipalID: "agent-billing", Preview: "Refund <http://evil.example|click me> `x` & \r\nBcc: victim@example.com",
		Status: toolplane.ApprovalPending, DefaultOnTimeout: "deny", ApproverGroup: group, Rule: "refunds",
		ExpiresAt: now.Add(time.Hour), CreatedAt: now, Version: 1}
	if err := st.InsertApproval(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

func newStoreOnly(t testing.TB) *sqlite.Store {
	t.Helper()
	return sqlitetest.New(t)
}
