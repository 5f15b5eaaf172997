package mcpserver

import (
	"errors"
	"net/http"

	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/door"
	"github.com/toolplane/toolplane/httperr"
)

// fail answers a request the endpoint refuses with code's status from the
// httperr table and msg as plain text: httperr.JSON, around every MCP
// endpoint, turns it into the error envelope (or the JSON-RPC error of the
// request's id), whose code is the status's own. So each refusal here
// names a code that is its status's own in the table (unauthenticated,
// denied, not_found, rate_limited, unavailable), never a status alone.
func fail(w http.ResponseWriter, code httperr.Code, msg string) {
	http.Error(w, msg, code.Status())
}

// refuse answers a request the door layer refused before it reached an
// MCP endpoint: err is the *door.Refusal of door.Door.Authenticate, or the
// *door.NotAgentError of door.CallsTools. A missing or refused token is
// answered 401 with a Bearer challenge naming meta (the endpoint's
// protected resource metadata, when there is one), a person's key 403, a
// spent budget 429, and credentials that cannot be checked (or any other
// error) 503. Every endpoint, /mcp and each governed copy, answers them
// through here, in the same words.
func refuse(w http.ResponseWriter, meta string, err error) {
	var (
		refused  *door.Refusal
		notAgent *door.NotAgentError
	)
	switch {
	case errors.As(err, &notAgent):
		fail(w, httperr.Denied, "this is a "+string(notAgent.Kind)+"'s key: tools are called with an agent's key (a person's key is for the REST API under /v1)")
	case errors.As(err, &refused) && refused.Kind == door.Unauthenticated:
		w.Header().Set("WWW-Authenticate", apikey.Challenge(meta, refused.Presented))
		msg := refused.Message
		if msg == "" {
			// The door layer leaves how to send a token to each door.
			msg = "send an agent's API key as Authorization: Bearer <key>"
		}
		fail(w, httperr.Unauthenticated, msg)
	case errors.As(err, &refused) && refused.Kind == door.RateLimited:
		fail(w, httperr.RateLimited, refused.Message)
	default:
		fail(w, httperr.Unavailable, "credentials cannot be checked right now; try again shortly")
	}
}
