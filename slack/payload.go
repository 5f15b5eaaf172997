package slack

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/notify"
)

// Interaction is what toolplane reads of a Slack interaction payload (a
// block_actions request): who pressed, in which workspace, which button,
// and where the message is.
type Interaction struct {
	Type string `json:"type"`
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
	Container struct {
		ChannelID string `json:"channel_id"`
		MessageTS string `json:"message_ts"`
	} `json:"container"`
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	Message struct {
		TS string `json:"ts"`
	} `json:"message"`
	ResponseURL string `json:"response_url"`
}

// Press is one button pressed, as parsed: the approval it names and
// whether it approves.
type Press struct {
	Team, User string
	Approval   string
	Approve    bool
	// Button says whether the press is of one of toolplane's decision
	// buttons at all; a press of anything else (the console link) is
	// acknowledged and does nothing.
	Button bool
	// Conversation, TS and ResponseURL say where the message is.
	Conversation, TS, ResponseURL string
}

// ParseForm answers the press a Slack interaction request's form body
// holds, in its payload field.
func ParseForm(body []byte) (*Press, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("%w: the body is not a form", toolplane.ErrInvalid)
	}
	payload := form["payload"]
	if len(payload) != 1 {
		return nil, fmt.Errorf("%w: the form holds no single payload", toolplane.ErrInvalid)
	}
	return ParsePayload([]byte(payload[0]))
}

// ParsePayload answers the press an interaction payload (JSON) holds.
// Every id it answers is checked for its shape, so what is looked up or
// shown later is never arbitrary outside text.
func ParsePayload(raw []byte) (*Press, error) {
	var in Interaction
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("%w: the payload is not an interaction", toolplane.ErrInvalid)
	}
	if in.Type != "block_actions" {
		return &Press{}, nil
	}
	if !slackID(in.Team.ID) || !slackID(in.User.ID) {
		return nil, fmt.Errorf("%w: the payload names no workspace or user", toolplane.ErrInvalid)
	}
	p := &Press{Team: in.Team.ID, User: in.User.ID, ResponseURL: in.ResponseURL,
		Conversation: in.Container.ChannelID, TS: in.Container.MessageTS}
	if p.Conversation == "" {
		p.Conversation = in.Channel.ID
	}
	if p.TS == "" {
		p.TS = in.Message.TS
	}
	if p.Conversation != "" && !slackID(p.Conversation) {
		return nil, fmt.Errorf("%w: the payload's conversation is not a Slack id", toolplane.ErrInvalid)
	}
	if len(p.TS) > 32 || len(p.ResponseURL) > 1024 {
		return nil, fmt.Errorf("%w: the payload's message reference is too long", toolplane.ErrInvalid)
	}
	if len(in.Actions) != 1 {
		return p, nil
	}
	a := in.Actions[0]
	switch a.ActionID {
	case notify.ActionApprove:
		p.Approve = true
	case notify.ActionReject:
	default:
		return p, nil
	}
	if err := toolplane.CheckLen("approval id", a.Value, toolplane.MaxRefLen); err != nil || a.Value == "" {
		return nil, fmt.Errorf("%w: the button names no approval", toolplane.ErrInvalid)
	}
	p.Button, p.Approval = true, a.Value
	return p, nil
}

// slackID reports whether s looks like a Slack id: 1 to 32 capital
// letters and digits.
func slackID(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
