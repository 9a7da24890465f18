package rest

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestUnauthenticatedConnectionsAreCapped: past a cap a new connection is
// accepted at once and closes the oldest unauthenticated one, of its own
// address past the per-address cap, else of all; an authenticated
// connection no longer counts and is never closed.
func TestUnauthenticatedConnectionsAreCapped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl := newGateListener(ln, 3, 2)
	defer gl.Close()
	// dial connects from a loopback address of its own, and returns the
	// client's end and the server's.
	dial := func(from string) (client net.Conn, server *gatedConn) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := gl.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return c, s.(*gatedConn)
	}
	// closed reports whether the server closed the client's connection.
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		return err != nil
	}

	a1, _ := dial("127.0.0.2")
	a2, _ := dial("127.0.0.2")
	a3, _ := dial("127.0.0.2") // past the per-address cap: a1 goes
	if !closed(a1) || closed(a2) || closed(a3) {
		t.Fatal("past the per-address cap, the address's oldest connection was not the one closed")
	}
	if all, from := gl.unauthenticated("127.0.0.2"); all != 2 || from != 2 {
		t.Fatalf("%d unauthenticated, %d from the address; want 2, 2", all, from)
	}
	b1, sb1 := dial("127.0.0.3")
	sb1.release() // authenticated
	b2, _ := dial("127.0.0.3")
	b3, _ := dial("127.0.0.3") // past the cap of all: a2, the oldest, goes
	if closed(b1) || !closed(a2) || closed(a3) || closed(b2) || closed(b3) {
		t.Fatal("past the cap, the oldest unauthenticated connection was not the one closed")
	}
	sb1.release() // again: counted once
	if all, from := gl.unauthenticated("127.0.0.3"); all != 3 || from != 2 {
		t.Fatalf("%d unauthenticated, %d from the address; want 3, 2", all, from)
	}
}
