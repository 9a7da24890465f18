package rest

import (
	"net"
	"testing"
	"time"
)

// TestUnauthenticatedConnectionsAreCapped: past the cap a connection is
// not accepted until an earlier one authenticates or closes.
func TestUnauthenticatedConnectionsAreCapped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl := newGateListener(ln, 2)
	defer gl.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 4 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	held := func() bool {
		select {
		case c := <-accepted:
			accepted <- c
			return false
		case <-time.After(100 * time.Millisecond):
			return true
		}
	}
	if !held() {
		t.Fatal("a third unauthenticated connection was accepted past the cap of 2")
	}
	first.(*gatedConn).release() // authenticated
	third := <-accepted
	if !held() {
		t.Fatal("a fourth connection was accepted with two unauthenticated open")
	}
	_ = second.Close()
	<-accepted
	_ = third.Close()
	first.(*gatedConn).release() // again: the slot is not given back twice
	// The fourth connection's slot, and the one the waiting Accept took.
	if len(gl.slots) != 2 {
		t.Fatalf("%d slots held, want 2", len(gl.slots))
	}
}
