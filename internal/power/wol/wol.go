// Package wol is the Wake-on-LAN power driver: a magic packet to switch a
// machine on, a TCP probe of one of its ports to see it up.
package wol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/claimstream/claimstream/internal/power"
)

// DefaultPort is the UDP port magic packets go to (the discard port).
const DefaultPort = 9

// Driver wakes one machine.
type Driver struct {
	// MAC is the machine's network card address (6 bytes).
	MAC net.HardwareAddr
	// Password is the SecureOn password: empty, 4 or 6 bytes.
	Password []byte
	// Broadcast is where packets go: a broadcast address of the machine's
	// network, or a relay that forwards them; host or host:port
	// (DefaultPort when no port is given).
	Broadcast string
	// Repeat is how many packets one On sends (at least one): UDP may
	// drop one.
	Repeat int
	// Probe is a TCP address on the machine (host:port, e.g. its ssh or
	// kubelet port) that accepts connections once it is up. Without it
	// the machine's state is unknown.
	Probe string
	// ProbeTimeout bounds one probe (one second when zero).
	ProbeTimeout time.Duration
}

// ID is the driver's name for the machine.
func (d *Driver) ID() string { return "wol:" + d.MAC.String() }

// ParseMAC reads a 6-byte MAC: aa:bb:cc:dd:ee:ff, aa-bb-..., or
// aabb.ccdd.eeff.
func ParseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("MAC %q: %w", s, err)
	}
	if len(mac) != 6 {
		return nil, fmt.Errorf("MAC %q: Wake-on-LAN needs a 6-byte (48-bit) address, not %d bytes", s, len(mac))
	}
	return mac, nil
}

// ParsePassword reads a SecureOn password: empty, 4 bytes written as an
// IPv4 address (192.168.1.1), or 6 bytes written as a MAC
// (aa:bb:cc:dd:ee:ff).
func ParsePassword(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if ip := net.ParseIP(s); ip != nil {
		if v4 := ip.To4(); v4 != nil && strings.Count(s, ".") == 3 {
			return []byte(v4), nil
		}
	}
	if mac, err := net.ParseMAC(s); err == nil && len(mac) == 6 {
		return []byte(mac), nil
	}
	return nil, errors.New("SecureOn password: want 4 bytes as a.b.c.d or 6 bytes as aa:bb:cc:dd:ee:ff")
}

// MagicPacket is the packet that wakes mac: 6 bytes 0xFF, mac 16 times,
// then the SecureOn password if any.
func MagicPacket(mac net.HardwareAddr, password []byte) ([]byte, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("MAC of %d bytes: want 6", len(mac))
	}
	if n := len(password); n != 0 && n != 4 && n != 6 {
		return nil, fmt.Errorf("SecureOn password of %d bytes: want 4 or 6", n)
	}
	p := make([]byte, 0, 6+16*6+len(password))
	p = append(p, bytes.Repeat([]byte{0xFF}, 6)...)
	for range 16 {
		p = append(p, mac...)
	}
	return append(p, password...), nil
}

// target is Broadcast with the default port filled in.
func (d *Driver) target() string {
	if _, _, err := net.SplitHostPort(d.Broadcast); err == nil {
		return d.Broadcast
	}
	return net.JoinHostPort(strings.Trim(d.Broadcast, "[]"), strconv.Itoa(DefaultPort))
}

// On sends the magic packet Repeat times.
func (d *Driver) On(ctx context.Context) error {
	pkt, err := MagicPacket(d.MAC, d.Password)
	if err != nil {
		return err
	}
	addr, err := net.ResolveUDPAddr("udp", d.target())
	if err != nil {
		return fmt.Errorf("%w: broadcast address %s: %v", power.ErrUnreachable, d.Broadcast, err)
	}
	conn, err := dialBroadcast(addr)
	if err != nil {
		return fmt.Errorf("%w: cannot send to %s: %v", power.ErrUnreachable, addr, err)
	}
	defer conn.Close()
	for range max(d.Repeat, 1) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := conn.Write(pkt); err != nil {
			return fmt.Errorf("%w: sending the magic packet to %s: %v", power.ErrUnreachable, addr, err)
		}
	}
	return nil
}

// Off cannot be done: a magic packet only wakes.
func (d *Driver) Off(context.Context) error {
	return fmt.Errorf("%w: Wake-on-LAN can only switch a machine on; switch it off with the exec driver (a shutdown over the machine's own API) or a BMC driver", power.ErrUnsupported)
}

// Status probes the machine's TCP port: a connection accepted within
// ProbeTimeout is on, anything else off (a machine that is off answers
// nothing, or its router answers that the host is unreachable).
func (d *Driver) Status(ctx context.Context) (power.Reading, error) {
	r := power.Reading{State: power.Unknown, ID: d.ID()}
	if d.Probe == "" {
		return r, nil
	}
	to := d.ProbeTimeout
	if to <= 0 {
		to = time.Second
	}
	dctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(dctx, "tcp", d.Probe)
	switch {
	case err == nil:
		conn.Close()
		r.State = power.On
	case ctx.Err() != nil:
		return r, ctx.Err()
	default:
		r.State = power.Off
	}
	return r, nil
}
