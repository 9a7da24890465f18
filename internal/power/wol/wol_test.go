package wol

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/claimstream/claimstream/internal/power"
)

// want is a magic packet written out by hand from the spec (AMD's Magic
// Packet white paper; SecureOn appends the password): six 0xFF, then the
// MAC sixteen times.
func want(mac, password []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	for i := 0; i < 16; i++ {
		b.Write(mac)
	}
	b.Write(password)
	return b.Bytes()
}

// listen opens a UDP socket on loopback that stands for the machine's
// network card.
func listen(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func receive(t *testing.T, c *net.UDPConn, n int) [][]byte {
	t.Helper()
	var got [][]byte
	buf := make([]byte, 1500)
	for len(got) < n {
		// A bound on a test that would otherwise hang if a packet is lost.
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		k, _, err := c.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("packet %d of %d: %v", len(got)+1, n, err)
		}
		got = append(got, append([]byte(nil), buf[:k]...))
	}
	return got
}

func TestOnSendsTheMagicPacket(t *testing.T) {
	for _, tc := range []struct {
		name, password string
		pw             []byte
	}{
		{"no password", "", nil},
		{"4-byte SecureOn", "192.168.1.7", []byte{192, 168, 1, 7}},
		{"6-byte SecureOn", "01:02:03:0a:0b:0c", []byte{1, 2, 3, 0x0a, 0x0b, 0x0c}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := listen(t)
			mac, err := ParseMAC("00:1A:2b:3c:4D:5e")
			if err != nil {
				t.Fatal(err)
			}
			pw, err := ParsePassword(tc.password)
			if err != nil {
				t.Fatal(err)
			}
			d := &Driver{MAC: mac, Password: pw, Broadcast: c.LocalAddr().String(), Repeat: 3}
			if err := d.On(context.Background()); err != nil {
				t.Fatal(err)
			}
			wantPkt := want([]byte{0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e}, tc.pw)
			if len(wantPkt) != 102+len(tc.pw) {
				t.Fatalf("spec packet of %d bytes", len(wantPkt))
			}
			for i, got := range receive(t, c, 3) {
				if !bytes.Equal(got, wantPkt) {
					t.Fatalf("packet %d:\n got % x\nwant % x", i+1, got, wantPkt)
				}
			}
		})
	}
}

func TestBroadcastAddressDefaultsToPort9(t *testing.T) {
	d := &Driver{Broadcast: "192.168.1.255"}
	if got := d.target(); got != "192.168.1.255:9" {
		t.Fatalf("target %q; want the discard port", got)
	}
	d.Broadcast = "192.168.1.255:7"
	if got := d.target(); got != "192.168.1.255:7" {
		t.Fatalf("target %q; want the given port", got)
	}
}

// TestOnReachesABroadcastAddress sends to loopback's broadcast address,
// which the kernel refuses (EACCES) from a socket without SO_BROADCAST,
// and receives the packet on a socket bound to the wildcard address.
func TestOnReachesABroadcastAddress(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	port := c.LocalAddr().(*net.UDPAddr).Port
	mac, _ := ParseMAC("00:1a:2b:3c:4d:5e")
	d := &Driver{MAC: mac, Broadcast: net.JoinHostPort("127.255.255.255", strconv.Itoa(port))}
	if err := d.On(context.Background()); err != nil {
		t.Fatalf("on to loopback's broadcast address: %v", err)
	}
	if got := receive(t, c, 1)[0]; !bytes.Equal(got, want(mac, nil)) {
		t.Fatalf("got % x", got)
	}
}

func TestStatusProbesTheMachinePort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := ParseMAC("00:1a:2b:3c:4d:5e")
	d := &Driver{MAC: mac, Probe: l.Addr().String(), ProbeTimeout: 5 * time.Second}
	r, err := d.Status(context.Background())
	if err != nil || r.State != power.On || r.ID != "wol:00:1a:2b:3c:4d:5e" {
		t.Fatalf("listening: %+v, %v; want on", r, err)
	}
	l.Close()
	r, err = d.Status(context.Background())
	if err != nil || r.State != power.Off {
		t.Fatalf("closed: %+v, %v; want off", r, err)
	}
	d.Probe = ""
	if r, err = d.Status(context.Background()); err != nil || r.State != power.Unknown {
		t.Fatalf("no probe: %+v, %v; want unknown", r, err)
	}
}

func TestOffIsUnsupported(t *testing.T) {
	err := (&Driver{}).Off(context.Background())
	if !errors.Is(err, power.ErrUnsupported) || power.Reason(err) != "Unsupported" {
		t.Fatalf("%v; want unsupported", err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{"", "00:1a:2b:3c:4d", "00:1a:2b:3c:4d:5e:6f:70", "zz:1a:2b:3c:4d:5e"} {
		if _, err := ParseMAC(s); err == nil {
			t.Errorf("ParseMAC(%q) accepted", s)
		}
	}
	for _, s := range []string{"1.2.3", "01:02:03:04:05", "::1", "secret"} {
		if _, err := ParsePassword(s); err == nil {
			t.Errorf("ParsePassword(%q) accepted", s)
		}
	}
}

// FuzzParse: whatever the MAC and password text, a parse either fails or
// yields a packet of the spec's shape carrying exactly the parsed bytes.
func FuzzParse(f *testing.F) {
	f.Add("00:1a:2b:3c:4d:5e", "")
	f.Add("00-1A-2B-3C-4D-5E", "10.0.0.1")
	f.Add("001a.2b3c.4d5e", "aa:bb:cc:dd:ee:ff")
	f.Add("00:00:5e:00:53:01:02:03", "::ffff:1.2.3.4")
	f.Fuzz(func(t *testing.T, macText, pwText string) {
		mac, merr := ParseMAC(macText)
		pw, perr := ParsePassword(pwText)
		if merr != nil || perr != nil {
			return
		}
		if len(mac) != 6 || (len(pw) != 0 && len(pw) != 4 && len(pw) != 6) {
			t.Fatalf("parsed MAC %x, password %x: wrong lengths", mac, pw)
		}
		pkt, err := MagicPacket(mac, pw)
		if err != nil {
			t.Fatalf("MagicPacket(%x, %x): %v", mac, pw, err)
		}
		if !bytes.Equal(pkt, want(mac, pw)) {
			t.Fatalf("packet % x", pkt)
		}
	})
}
