package egress

// CheckHost refuses a host a request may not be sent to: one that is not
// on the host list, or an IP literal whose address is refused. The broker
// checks it when it releases a connection, before anything is dialled.
func (p *Policy) CheckHost(host string) error { return p.checkHost(host) }
