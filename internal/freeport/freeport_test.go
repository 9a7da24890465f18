package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The ports are distinct, free, and below the ephemeral range, where no
// outgoing connection takes them.
func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := Ports(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	low := ephemeralLow()
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		if low-lowest >= 1000 && (p < lowest || p >= low) {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// A port some listener holds is never handed out.
func TestPortsSkipsAHeldPort(t *testing.T) {
	first, err := Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(first[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 50 {
		ports, err := Ports(10)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if p == first[0] {
				t.Fatalf("held port %d handed out", p)
			}
		}
	}
}
