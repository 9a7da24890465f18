// Package freeport picks TCP ports on 127.0.0.1 for a process a test starts
// and that binds them itself a moment later.
//
// A port the kernel handed out for ":0" and that was closed again lies in
// the ephemeral range, where every outgoing connection of the machine also
// takes its local port: between the close and the child's bind, a client
// connection (to an API server, to NATS) may take it, and the child fails
// with "address already in use". The ports here are picked below that
// range, where only an explicit bind competes.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port picked (above the well-known and most
// registered service ports).
const lowest = 10000

// handedOut holds the ports this process handed out: two calls a moment
// apart must not name one port whose first taker has not bound it yet.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// Ports returns n distinct TCP ports free on 127.0.0.1 now, below the
// kernel's ephemeral range when the range leaves room for it (else from
// ":0", as before).
func Ports(n int) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	out := make([]int, 0, n)
	below := ephemeralLow()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for tries := 0; len(out) < n; tries++ {
		addr := "127.0.0.1:0"
		if below-lowest >= 1000 && tries < 100*n {
			addr = "127.0.0.1:" + strconv.Itoa(lowest+rand.IntN(below-lowest))
		}
		if p, _ := strconv.Atoi(strings.TrimPrefix(addr, "127.0.0.1:")); handedOut.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				return nil, fmt.Errorf("free port: %w", err)
			}
			continue // taken: pick another
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		handedOut.ports[port] = true
		out = append(out, port)
	}
	return out, nil
}

// Addr returns one free "127.0.0.1:port".
func Addr() (string, error) {
	p, err := Ports(1)
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(p[0]), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// 32768, the usual value, elsewhere).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return 32768
	}
	return n
}
