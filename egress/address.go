package egress

import (
	"net/netip"
)

// class is a range of addresses refused unless an allow_cidrs range
// admits them.
type class struct {
	prefix netip.Prefix
	name   string
	// single: only an allow_cidrs entry of this one address admits it,
	// never a wider range that happens to hold it. Allowing a private or
	// link-local network for a database there must not open the cloud
	// metadata service beside it.
	single bool
	// embeds: the class carries an IPv4 address (NAT64, 6to4, the
	// IPv4-compatible form) that is checked in its stead; the carrier is
	// refused only when the address it carries is.
	embeds func(netip.Addr) netip.Addr

	// The prefix as masks, so the check is a few integer comparisons
	// per class: base and mask of an IPv4 class, hi and lo of IPv6.
	base4, mask4                   uint32
	baseHi, baseLo, maskHi, maskLo uint64
}

// contains4 reports whether the class holds the IPv4 address x.
func (c *class) contains4(x uint32) bool { return x&c.mask4 == c.base4 }

// contains6 reports whether the class holds the IPv6 address hi:lo.
func (c *class) contains6(hi, lo uint64) bool {
	return hi&c.maskHi == c.baseHi && lo&c.maskLo == c.baseLo
}

func init() {
	for i := range classesV4 {
		c := &classesV4[i]
		c.base4 = be32(c.prefix.Addr().As4())
		c.mask4 = ^uint32(0) << (32 - c.prefix.Bits())
		if c.prefix.Bits() == 0 {
			c.mask4 = 0
		}
	}
	for i := range classesV6 {
		c := &classesV6[i]
		c.baseHi, c.baseLo = be128(c.prefix.Addr().As16())
		c.maskHi, c.maskLo = mask128(c.prefix.Bits())
	}
}

func be32(b [4]byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func be128(b [16]byte) (hi, lo uint64) {
	for i := range 8 {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return hi, lo
}

// mask128 answers the mask of a prefix of bits bits, as two halves.
func mask128(bits int) (hi, lo uint64) {
	switch {
	case bits >= 128:
		return ^uint64(0), ^uint64(0)
	case bits > 64:
		return ^uint64(0), ^uint64(0) << (128 - bits)
	case bits == 64:
		return ^uint64(0), 0
	case bits > 0:
		return ^uint64(0) << (64 - bits), 0
	}
	return 0, 0
}

// classesV4 are the refused IPv4 classes, the most specific first so a
// refusal names the narrowest one.
var classesV4 = []class{
	{prefix: pfx("169.254.169.254/32"), name: "cloud metadata address", single: true},
	{prefix: pfx("100.100.100.200/32"), name: "cloud metadata address", single: true},
	{prefix: pfx("168.63.129.16/32"), name: "cloud metadata address", single: true},
	{prefix: pfx("0.0.0.0/32"), name: "unspecified address"},
	{prefix: pfx("255.255.255.255/32"), name: "broadcast address"},
	{prefix: pfx("0.0.0.0/8"), name: "this-network address (0.0.0.0/8)"},
	{prefix: pfx("127.0.0.0/8"), name: "loopback address"},
	{prefix: pfx("10.0.0.0/8"), name: "private address"},
	{prefix: pfx("172.16.0.0/12"), name: "private address"},
	{prefix: pfx("192.168.0.0/16"), name: "private address"},
	{prefix: pfx("100.64.0.0/10"), name: "carrier-grade NAT address"},
	{prefix: pfx("169.254.0.0/16"), name: "link-local address"},
	{prefix: pfx("198.18.0.0/15"), name: "benchmarking address"},
	{prefix: pfx("224.0.0.0/4"), name: "multicast address"},
	{prefix: pfx("240.0.0.0/4"), name: "reserved address"},
}

// classesV6 are the refused IPv6 classes. IPv4-mapped addresses never
// reach them: they are unmapped and checked as IPv4.
var classesV6 = []class{
	{prefix: pfx("::/128"), name: "unspecified address"},
	{prefix: pfx("::1/128"), name: "loopback address"},
	{prefix: pfx("fd00:ec2::254/128"), name: "cloud metadata address", single: true},
	{prefix: pfx("::/96"), name: "IPv4-compatible address", embeds: last32},
	{prefix: pfx("::ffff:0:0:0/96"), name: "IPv4-translated address", embeds: last32},
	{prefix: pfx("64:ff9b::/96"), name: "NAT64 address", embeds: last32},
	{prefix: pfx("64:ff9b:1::/48"), name: "local-use NAT64 address"},
	{prefix: pfx("2002::/16"), name: "6to4 address", embeds: sixToFour},
	{prefix: pfx("2001::/32"), name: "Teredo address"},
	{prefix: pfx("fc00::/7"), name: "private address"},
	{prefix: pfx("fe80::/10"), name: "link-local address"},
	{prefix: pfx("fec0::/10"), name: "site-local address"},
	{prefix: pfx("ff00::/8"), name: "multicast address"},
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// last32 answers the IPv4 address in the last 32 bits of a.
func last32(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:16]))
}

// sixToFour answers the IPv4 address of a 6to4 address (2002:v4::/48).
func sixToFour(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[2:6]))
}

// classify answers the refused class a falls in, nil when none. For a
// carrier of an IPv4 address it answers the carrier's class and the
// carried address's, or nil when the carried address is not refused.
func classify(a netip.Addr) (c, inner *class, carried netip.Addr) {
	if a.Is4() {
		return classify4(a), nil, netip.Addr{}
	}
	hi, lo := be128(a.As16())
	for i := range classesV6 {
		k := &classesV6[i]
		if !k.contains6(hi, lo) {
			continue
		}
		if k.embeds == nil {
			return k, nil, netip.Addr{}
		}
		v4 := k.embeds(a)
		in := classify4(v4)
		if in == nil {
			return nil, nil, netip.Addr{}
		}
		return k, in, v4
	}
	return nil, nil, netip.Addr{}
}

func classify4(a netip.Addr) *class {
	x := be32(a.As4())
	for i := range classesV4 {
		if classesV4[i].contains4(x) {
			return &classesV4[i]
		}
	}
	return nil
}

// verdict is the outcome of checking one address: class nil when the
// address may be dialed.
type verdict struct {
	addr    netip.Addr // the address checked: unmapped, without a zone
	class   *class
	inner   *class
	carried netip.Addr
}

// verdict checks a: unmapped and without its zone, its refused class, and
// whether an allow_cidrs range admits it. A carrier of an IPv4 address is
// admitted by a range holding either itself or the address it carries.
func (p *Policy) verdict(a netip.Addr) verdict {
	a = a.WithZone("").Unmap()
	c, inner, carried := classify(a)
	if c == nil {
		return verdict{}
	}
	single := c.single || inner != nil && inner.single
	if p.admits(a, single) || inner != nil && p.admits(carried, inner.single) {
		return verdict{}
	}
	return verdict{addr: a, class: c, inner: inner, carried: carried}
}

// admits reports whether an allow_cidrs range admits a; single asks for
// a range of that one address.
func (p *Policy) admits(a netip.Addr, single bool) bool {
	for _, r := range p.allow {
		if r.Contains(a) && (!single || r.IsSingleIP()) {
			return true
		}
	}
	return false
}

// rule words the refusal for a RefusedError.
func (v verdict) rule() string {
	what := v.class.name + " " + v.addr.String()
	if v.inner != nil {
		what += " carrying " + v.inner.name + " " + v.carried.String()
	}
	if v.class.single || v.inner != nil && v.inner.single {
		return what + " is refused; only an allow_cidrs entry of that single address allows it"
	}
	return what + " is refused; allow a CIDR explicitly"
}
