package slack

import (
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// ErrCode: a link code that is forged, expired, used, or of another
// organization. Which of these is not said.
var ErrCode = toolplane.Refine(toolplane.ErrForbidden, "slack link code not valid")

// codePurpose names the derived key link codes are signed with.
const codePurpose = "toolplane slack link code v1"

// CodeTTL is how long a link code works.
const CodeTTL = 10 * time.Minute

// maxCode bounds a code read from a request.
const maxCode = 1024

// code is what a link code binds: the Slack account that was shown it,
// in the organization and through the channel that showed it, until
// when, and a nonce that makes it work once.
type code struct {
	Key     string `json:"k"`
	Org     string `json:"o"`
	Channel string `json:"c"`
	Team    string `json:"t"`
	User    string `json:"u"`
	Expires int64  `json:"e"`
	Nonce   string `json:"n"`
}

func (c *code) KeyID() string { return c.Key }

// signCode answers a code for the Slack account (team, user) of org's
// channel, working until now+CodeTTL.
func signCode(keys *secret.Keyring, org, channel, team, user string, now time.Time) (string, error) {
	c := code{Key: keys.Current(), Org: org, Channel: channel, Team: team, User: user, Expires: now.Add(CodeTTL).Unix(), Nonce: rand.Text()}
	return keys.SignToken(codePurpose, &c)
}

// parseCode verifies a code's signature and expiry and answers what it
// binds; it does not use it up.
func parseCode(keys *secret.Keyring, token string, now time.Time) (*code, error) {
	var c code
	if err := keys.OpenToken(codePurpose, token, maxCode, &c); errors.Is(err, secret.ErrToken) {
		return nil, ErrCode
	} else if err != nil {
		return nil, fmt.Errorf("check slack link code: %w", err)
	}
	if c.Org == "" || c.Channel == "" || !slackID(c.Team) || !slackID(c.User) || c.Nonce == "" || !now.Before(time.Unix(c.Expires, 0)) {
		return nil, ErrCode
	}
	return &c, nil
}
