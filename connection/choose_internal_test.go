package connection

import (
	"slices"
	"testing"

	"github.com/toolplane/toolplane"
)

// TestChoose passes each connection over for each reason a call may not
// use it, and picks the one it may.
func TestChoose(t *testing.T) {
	const (
		active  = toolplane.ConnectionActive
		waiting = toolplane.ConnectionNeedsReauth
		revoked = toolplane.ConnectionRevoked
		code    = toolplane.ConnectionAuthorizationCode
		static  = toolplane.ConnectionStatic
	)
	// conn is a connection of provider crm (or the provider given) held
	// by user ("" for the organization's).
	conn := func(id string, kind toolplane.ConnectionKind, user string, state toolplane.ConnectionState, provider ...string) toolplane.Connection {
		c := toolplane.Connection{ID: id, Name: id, Provider: "crm", Kind: kind, UserID: user, State: state}
		if len(provider) > 0 {
			c.Provider = provider[0]
		}
		return c
	}
	var (
		shared         = conn("shared", static, "", active)
		shared2        = conn("shared2", static, "", active)
		sharedWaiting  = conn("shared-waiting", static, "", waiting)
		sharedWaiting2 = conn("shared-waiting2", static, "", waiting)
		sharedRevoked  = conn("shared-revoked", static, "", revoked)
		oldRevoked     = conn("old-revoked", static, "", revoked)
		app            = conn("app", code, "", active)
		samsOwn        = conn("sams", code, "sam", active)
		samsWaiting    = conn("sams-waiting", code, "sam", waiting)
		samsRevoked    = conn("sams-revoked", code, "sam", revoked)
		kims           = conn("kims", code, "kim", active)
		otherShared    = conn("erp", static, "", active, "erp")
	)
	for _, tc := range []struct {
		name  string
		user  string
		id    string                // the connection_id named
		named *toolplane.Connection // what the store holds under id
		read  []toolplane.Connection
		why   passOver
		conn  string   // the connection chosen, or passed over as unusable
		among []string // the connections a call could not choose between
	}{
		{name: "named, none exists", id: "con_gone", why: notOffered},
		{name: "named, another provider's", id: "erp", named: &otherShared, why: notOffered},
		{name: "named, another person's", user: "sam", id: "kims", named: &kims, why: notOffered},
		{name: "named, a person's for a call made for none", id: "sams", named: &samsOwn, why: notOffered},
		{name: "named, the application's row", user: "sam", id: "app", named: &app, why: notOffered},
		{name: "named, waiting for consent", user: "sam", id: "sams-waiting", named: &samsWaiting, why: unusable, conn: "sams-waiting"},
		{name: "named, revoked", id: "shared-revoked", named: &sharedRevoked, why: unusable, conn: "shared-revoked"},
		{name: "named, the person's own", user: "sam", id: "sams", named: &samsOwn, conn: "sams"},
		{name: "named, a shared one for a person", user: "sam", id: "shared", named: &shared, conn: "shared"},
		{name: "named, never those read", id: "shared", named: &shared, read: []toolplane.Connection{shared2}, conn: "shared"},

		{name: "none read", why: missing},
		{name: "the one shared", read: []toolplane.Connection{shared}, conn: "shared"},
		{name: "the one shared, another waiting beside it", read: []toolplane.Connection{shared, sharedWaiting}, conn: "shared"},
		{name: "two shared", read: []toolplane.Connection{shared, shared2}, why: ambiguous, among: []string{"shared", "shared2"}},
		{name: "two shared, one waiting", read: []toolplane.Connection{shared, shared2, sharedWaiting}, why: ambiguous, among: []string{"shared", "shared2"}},
		{name: "shared waiting", read: []toolplane.Connection{sharedWaiting, sharedRevoked}, why: unusable, conn: "shared-waiting"},
		{name: "shared waiting, the first", read: []toolplane.Connection{sharedWaiting, sharedWaiting2}, why: unusable, conn: "shared-waiting"},
		{name: "shared revoked, the last read", read: []toolplane.Connection{oldRevoked, sharedRevoked}, why: unusable, conn: "shared-revoked"},
		{name: "the application's row is no one's", read: []toolplane.Connection{app}, why: missing},
		{name: "a person's is not shared", read: []toolplane.Connection{samsOwn}, why: missing},
		{name: "another person's is not mine", user: "kim", read: []toolplane.Connection{samsOwn, samsWaiting}, why: missing},

		{name: "the person's own before the shared", user: "sam", read: []toolplane.Connection{shared, samsOwn}, conn: "sams"},
		{name: "the person's own waiting keeps the shared from being borrowed", user: "sam", read: []toolplane.Connection{shared, samsWaiting}, why: unusable, conn: "sams-waiting"},
		{name: "the person's own revoked lets the shared serve", user: "sam", read: []toolplane.Connection{shared, samsRevoked}, conn: "shared"},
		{name: "the person's own revoked, before the shared revoked", user: "sam", read: []toolplane.Connection{samsRevoked, sharedRevoked}, why: unusable, conn: "sams-revoked"},
		{name: "the shared revoked, for a person", user: "sam", read: []toolplane.Connection{sharedRevoked, kims}, why: unusable, conn: "shared-revoked"},
		{name: "the provider takes consent: the shared revoked is not the person's", user: "sam", read: []toolplane.Connection{app, sharedRevoked}, why: missing},
		{name: "the provider takes consent: the shared is not borrowed", user: "sam", read: []toolplane.Connection{app, shared}, why: missing},
		{name: "no application, the shared for a person", user: "sam", read: []toolplane.Connection{shared, kims}, conn: "shared"},
		{name: "the person's own, among others'", user: "sam", read: []toolplane.Connection{app, kims, samsOwn}, conn: "sams"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := offer{user: tc.user, provider: "crm", id: tc.id, named: tc.named, read: tc.read}
			if why, id, among := chosenIDs(choose(o)); why != tc.why || id != tc.conn || !slices.Equal(among, tc.among) {
				t.Errorf("choose = %v %q among %v; want %v %q among %v", why, id, among, tc.why, tc.conn, tc.among)
			}
			if tc.id != "" {
				return
			}
			// The broker reads the states in order, and the next only
			// while none was found: what it has not read yet must change
			// no answer but missing.
			for n := firstReads(tc.user); n <= len(readOrder); n++ {
				o.read = nil
				for _, c := range tc.read {
					if slices.Contains(readOrder[:n], c.State) {
						o.read = append(o.read, c)
					}
				}
				if why, id, among := chosenIDs(choose(o)); why != missing && (why != tc.why || id != tc.conn || !slices.Equal(among, tc.among)) {
					t.Errorf("read %v: choose = %v %q among %v; want missing, or %v %q among %v", readOrder[:n], why, id, among, tc.why, tc.conn, tc.among)
				}
			}
		})
	}
}

// chosenIDs answers ch with the IDs of its connections.
func chosenIDs(ch choice) (why passOver, id string, among []string) {
	for _, c := range ch.among {
		among = append(among, c.ID)
	}
	if ch.conn != nil {
		id = ch.conn.ID
	}
	return ch.why, id, among
}

// TestChooseAnswersWhatItWasOffered: the connection chosen is the one
// offered, not a copy, so what memory keeps of it (its shown form) is
// found again by identity.
func TestChooseAnswersWhatItWasOffered(t *testing.T) {
	read := []toolplane.Connection{{ID: "a", Provider: "crm", Kind: toolplane.ConnectionStatic, State: toolplane.ConnectionActive}}
	if got := choose(offer{provider: "crm", read: read}); got.conn != &read[0] {
		t.Errorf("choose answered a copy of the connection read")
	}
	named := &toolplane.Connection{ID: "b", Provider: "crm", Kind: toolplane.ConnectionStatic, State: toolplane.ConnectionActive}
	if got := choose(offer{provider: "crm", id: "b", named: named}); got.conn != named {
		t.Errorf("choose answered a copy of the connection named")
	}
}
