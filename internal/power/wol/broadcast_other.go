//go:build !unix

package wol

import "net"

// dialBroadcast opens a UDP socket to addr.
func dialBroadcast(addr *net.UDPAddr) (*net.UDPConn, error) {
	return net.DialUDP("udp", nil, addr)
}
