package egress

import "net"

// LoopbackHost reports whether host, as written, can only be this
// machine: the name localhost, or a loopback IP literal (127.0.0.0/8,
// ::1, or 127.x written IPv4-mapped). Nothing is resolved, so a name that
// merely resolves to a loopback address does not count. It is the test
// for "plain text is allowed to a server on this machine" (a Vault dev
// server, an SMTP relay without STARTTLS); where the network is dialled,
// the Policy decides by the resolved address instead.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
