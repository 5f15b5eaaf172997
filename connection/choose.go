package connection

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/toolplane/toolplane"
)

// ChoiceArgument is the argument a tool declares when the model may choose
// among several connections of its provider: the connection's ID, never
// a credential.
const ChoiceArgument = "connection_id"

// connectionIDs is the shape of a connection's ID (see toolplane.NewID).
var connectionIDs = regexp.MustCompile(`^con_[0-9a-z]{1,64}$`)

// maxCandidates bounds how many connections of one provider a call looks
// through; an organization with more must have the model choose.
const maxCandidates = 50

// offer is what a call's connection is chosen from.
type offer struct {
	// user is the person the call is made for ("" for none), provider
	// the one the tool declares.
	user, provider string
	// id is the connection_id the model named, "" when it named none;
	// named is the connection of that ID, nil when there is none. A call
	// naming one is offered that one only.
	id    string
	named *toolplane.Connection
	// read are the provider's connections read for a call naming none,
	// by state: the active ones, then, as far as they were read, those
	// waiting for a new consent, then the revoked ones. Those not read
	// yet change no choice but missing.
	read []toolplane.Connection
}

// passOver is why no connection was chosen for a call.
type passOver int

const (
	// chosen: nothing was passed over; a connection was chosen.
	chosen passOver = iota
	// notOffered: the connection_id named is none this call may use: it
	// does not exist, or is another provider's, another person's, or an
	// OAuth application's row.
	notOffered
	// unusable: the connection that would serve the call waits for a new
	// consent, or was revoked.
	unusable
	// missing: no connection is set up for the call.
	missing
	// ambiguous: several active connections could serve the call; the
	// model must name one.
	ambiguous
)

// choice is what choose answers: the connection chosen, or why none was.
type choice struct {
	why passOver
	// conn is the connection chosen or, when it is unusable, the one
	// that would have served.
	conn *toolplane.Connection
	// among are the connections a call could not choose between
	// (ambiguous), in the order read.
	among []*toolplane.Connection
}

// choose picks a call's connection among those it is offered: the one the
// model named by connection_id, or else the person's own (for a call made
// for a person), or else the organization's shared one, when there is
// exactly one active. It reads nothing but its offer.
func choose(o offer) choice {
	if o.id != "" {
		c := o.named
		switch {
		case c == nil || c.Provider != o.provider || !usableBy(c, o.user):
			return choice{why: notOffered}
		case c.State != toolplane.ConnectionActive:
			return choice{why: unusable, conn: c}
		}
		return choice{conn: c}
	}
	// A person's own connection serves their calls; where the provider
	// takes a person's consent, their calls never borrow the
	// organization's.
	personal := o.user != "" && hasApp(o.read)
	own := personal || holds(o.read, o.user, true)
	var first, waiting *toolplane.Connection
	active := 0
	for i := range o.read {
		c := &o.read[i]
		if c.State == toolplane.ConnectionRevoked || !candidate(c, o.user, own) {
			continue
		}
		if c.State == toolplane.ConnectionActive {
			if active == 0 {
				first = c
			}
			active++
		} else if waiting == nil {
			waiting = c
		}
	}
	switch {
	case active == 1:
		return choice{conn: first}
	case active > 1:
		among := make([]*toolplane.Connection, 0, active)
		for i := range o.read {
			if c := &o.read[i]; c.State == toolplane.ConnectionActive && candidate(c, o.user, own) {
				among = append(among, c)
			}
		}
		return choice{why: ambiguous, among: among}
	case waiting != nil:
		return choice{why: unusable, conn: waiting}
	}
	// Nothing usable: a revoked connection (the last read), when the
	// call would have had one, says why better than none.
	own = personal || holds(o.read, o.user, false)
	for i := len(o.read) - 1; i >= 0; i-- {
		if c := &o.read[i]; c.State == toolplane.ConnectionRevoked && candidate(c, o.user, own) {
			return choice{why: unusable, conn: c}
		}
	}
	return choice{why: missing}
}

// candidate reports whether c may serve a call made for user naming no
// connection: the person's own when own is set, or else one of the
// organization's shared connections.
func candidate(c *toolplane.Connection, user string, own bool) bool {
	if own {
		return c.UserID == user
	}
	return c.UserID == "" && c.Kind != toolplane.ConnectionAuthorizationCode
}

// usableBy reports whether a call made for user (none: "") may use c: a
// shared connection serves every call, a person's own only theirs, and an
// OAuth application's row none.
func usableBy(c *toolplane.Connection, user string) bool {
	if c.UserID != "" {
		return c.UserID == user
	}
	return c.Kind != toolplane.ConnectionAuthorizationCode
}

// hasApp reports whether the provider takes a person's consent: the
// organization holds its OAuth application.
func hasApp(cs []toolplane.Connection) bool {
	for i := range cs {
		if c := &cs[i]; c.Kind == toolplane.ConnectionAuthorizationCode && c.UserID == "" && c.State == toolplane.ConnectionActive {
			return true
		}
	}
	return false
}

// holds reports whether user (none: "") holds a connection of their own
// among cs: one not revoked when live is set, or else a revoked one.
func holds(cs []toolplane.Connection, user string, live bool) bool {
	for i := range cs {
		if c := &cs[i]; user != "" && c.UserID == user && (c.State != toolplane.ConnectionRevoked) == live {
			return true
		}
	}
	return false
}

// readOrder is the order the states of a provider's connections are read
// in for a call naming none (offer.read).
var readOrder = [...]toolplane.ConnectionState{toolplane.ConnectionActive, toolplane.ConnectionNeedsReauth, toolplane.ConnectionRevoked}

// firstReads answers how many states of readOrder a call made for user
// ("" for none) reads at first. A call made for no person takes the one
// active shared connection whatever waits beside it, so the connections
// waiting for a new consent are read only when none is active: one read
// per call, not two. A person's own connection waiting for consent must
// be seen whenever the call is a person's, since it keeps the shared one
// from being borrowed. The revoked ones are read only to say why nothing
// else was found.
func firstReads(user string) int {
	if user != "" {
		return 2
	}
	return 1
}

// chooseFor reads what the call's connection is chosen from, through mem
// (nil: the store), and answers the connection chosen, or the call's
// refusal.
func (s *Broker) chooseFor(ctx context.Context, mem *memory, inv *toolplane.Invocation, d *toolplane.Definition, args any) (*toolplane.Connection, error) {
	org := inv.OrganizationID
	o := offer{user: inv.UserID, provider: d.Connection}
	if id, ok := namedID(args); ok {
		o.id = id
		c, err := mem.get(ctx, s.cfg.Store, org, id)
		switch {
		case errors.Is(err, toolplane.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("read connection %s: %w", id, err)
		default:
			o.named = c
		}
		return s.answer(ctx, o, choose(o), inv, d)
	}
	// Revoked connections stay in the store for good, and an
	// organization rotating a connection piles them up: the ones a call
	// may use are read by state, never from a page where revoked ones
	// could crowd them out. The next state is read only while what was
	// read leaves the call none.
	n := firstReads(o.user)
	var err error
	if o.read, err = s.candidates(ctx, mem, org, o.provider, readOrder[:n]...); err != nil {
		return nil, err
	}
	ch := choose(o)
	for ; ch.why == missing && n < len(readOrder); n++ {
		more, err := s.candidates(ctx, mem, org, o.provider, readOrder[n])
		if err != nil {
			return nil, err
		}
		o.read = append(o.read, more...) // what memory keeps is clipped: this copies
		ch = choose(o)
	}
	return s.answer(ctx, o, ch, inv, d)
}

// answer answers the connection ch chose for the call, or the call's
// refusal, saying why none was chosen of what o offered.
func (s *Broker) answer(ctx context.Context, o offer, ch choice, inv *toolplane.Invocation, d *toolplane.Definition) (*toolplane.Connection, error) {
	switch ch.why {
	case chosen:
		return ch.conn, nil
	case notOffered:
		// The model reads the refusal as the platform's words: the value
		// it sent is repeated only when it has a connection ID's shape,
		// never as text of its choosing.
		named := "the connection_id given"
		if connectionIDs.MatchString(o.id) {
			named = o.id
		}
		return nil, &toolplane.ConnectionError{Code: toolplane.CodeConnectionRequired,
			Message: fmt.Sprintf("%s is not a connection of %s this call may use; call again with one of the connection_id values you were shown, or without connection_id", named, o.provider)}
	case unusable:
		return nil, s.consentLink(ctx, checkUsable(ch.conn), ch.conn, inv, d)
	case ambiguous:
		ids := make([]string, 0, len(ch.among))
		for _, c := range ch.among {
			ids = append(ids, c.ID+" ("+c.Name+")")
		}
		return nil, &toolplane.ConnectionError{Code: toolplane.CodeConnectionAmbiguous,
			Message: fmt.Sprintf("%s can use several connections to %s: %s. Call again with connection_id set to the one meant; nothing was done.", d.Name, o.provider, strings.Join(ids, ", "))}
	default:
		return nil, &toolplane.ConnectionError{Code: toolplane.CodeConnectionRequired,
			Message:          fmt.Sprintf("%s needs a connection to %s, and none is set up for this call; nothing was done. Ask the user to connect, then call again.", d.Name, o.provider),
			AuthorizationURL: s.authorizeLink(ctx, inv, d)}
	}
}

// candidates answers the organization's connections of provider in the
// states given, at most maxCandidates of each.
func (s *Broker) candidates(ctx context.Context, mem *memory, org, provider string, states ...toolplane.ConnectionState) ([]toolplane.Connection, error) {
	var all []toolplane.Connection
	for _, st := range states {
		cs, _, err := mem.list(ctx, s.cfg.Store, org, listQuery{provider: provider, state: st}, maxCandidates)
		if err != nil {
			return nil, fmt.Errorf("list connections of %s: %w", provider, err)
		}
		if all == nil {
			all = cs // shared with memory, and clipped: appending copies
		} else {
			all = append(all, cs...)
		}
	}
	return all, nil
}

// namedID answers the connection_id argument, when the call names one.
func namedID(args any) (string, bool) {
	m, ok := args.(map[string]any)
	if !ok {
		return "", false
	}
	id, ok := m[ChoiceArgument].(string)
	return id, ok && id != ""
}
