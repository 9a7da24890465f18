//go:build unix

package wol

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// dialBroadcast opens a UDP socket to addr that may send to a broadcast
// address (SO_BROADCAST; without it the kernel refuses with EACCES).
func dialBroadcast(addr *net.UDPAddr) (*net.UDPConn, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("udp", addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}
