package copycodec

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func sample() []byte {
	e := NewEncoder("TEST", 3, 0)
	e.Uint(300)
	e.Int(-7)
	e.Float(2.5)
	e.Str("slot-1")
	e.Bool(true)
	e.Uint(2) // a count
	e.Str("a")
	e.Str("b")
	return e.Seal()
}

func TestRoundTrip(t *testing.T) {
	d, err := Open(sample(), "TEST", 3, "a test copy")
	if err != nil {
		t.Fatal(err)
	}
	u, i, f, s, b := d.Uint(), d.Int(), d.Float(), d.Str(), d.Bool()
	n := d.Count()
	var list []string
	for range n {
		list = append(list, d.Str())
	}
	if err := d.End(); err != nil {
		t.Fatal(err)
	}
	if u != 300 || i != -7 || f != 2.5 || s != "slot-1" || !b || strings.Join(list, ",") != "a,b" {
		t.Fatalf("read %d %d %v %q %v %v", u, i, f, s, b, list)
	}
}

func TestOpenRefusesWhatIsNotAWholeCopy(t *testing.T) {
	good := sample()
	flipped := append([]byte(nil), good...)
	flipped[8] ^= 0x40
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"another magic":   {append([]byte("NOPE"), good[4:]...), "not a test copy"},
		"another version": {append(append([]byte("TEST"), 4), good[5:]...), "format version 4, this build reads 3"},
		"cut short":       {good[:len(good)-1], "checksum mismatch"},
		"a flipped bit":   {flipped, "checksum mismatch"},
		"too short":       {[]byte("TES"), "not a test copy"},
	} {
		if _, err := Open(tc.b, "TEST", 3, "a test copy"); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A decode past the payload, a count past the bytes left, a bad flag or a
// reference out of its table is a fault that sticks; every later read is
// a zero value.
func TestDecoderFaultsStick(t *testing.T) {
	e := NewEncoder("TEST", 1, 0)
	e.Uint(1 << 40) // read as a count: far past the bytes left
	e.B = append(e.B, 2)
	d, err := Open(e.Seal(), "TEST", 1, "a test copy")
	if err != nil {
		t.Fatal(err)
	}
	if n := d.Count(); n != 0 || d.Err == nil || !strings.Contains(d.Err.Error(), "a count of 1099511627776") {
		t.Fatalf("count %d, err %v", n, d.Err)
	}
	if d.Str() != "" || d.Uint() != 0 || d.Bool() || d.End() == nil {
		t.Fatal("a read after the fault returned something")
	}

	d = &Decoder{B: []byte{2}}
	if d.Bool() || d.Err == nil || d.Err.Error() != "bad flag" {
		t.Fatalf("flag 2: %v", d.Err)
	}
	d = &Decoder{B: []byte{5}}
	if d.Ref(5, "claim") != 0 || d.Err == nil || d.Err.Error() != "claim 5 of 5" {
		t.Fatalf("ref: %v", d.Err)
	}
	d = &Decoder{B: []byte{1, 9}}
	d.Uint()
	if d.End() == nil || d.End().Error() != "1 bytes past the end" {
		t.Fatalf("end: %v", d.End())
	}
	d = &Decoder{B: []byte{1, 2, 3}}
	if d.Float() != 0 || d.Err == nil || d.Err.Error() != "cut short" {
		t.Fatalf("float: %v", d.Err)
	}
}

// A copy decoded as it is read from a stream, a byte at a time and with
// strings longer than the window, reads as the copy held whole; damage
// is found by the end at the latest.
func TestStreamedCopyReadsAsTheWholeOne(t *testing.T) {
	long := strings.Repeat("x", 3*streamWindow+5)
	e := NewEncoder("TEST", 3, 0)
	e.Uint(2)
	e.Str(long)
	e.Str("short")
	for i := range 50_000 {
		e.Uint(uint64(i) << 20)
	}
	e.Float(1.5)
	e.Bool(true)
	good := e.Seal()
	decode := func(d *Decoder, damaged bool) error {
		n := d.Count()
		var got []string
		for range n {
			got = append(got, d.Str())
		}
		for i := range 50_000 {
			if v := d.Uint(); v != uint64(i)<<20 && d.Err == nil && !damaged {
				t.Fatalf("value %d read %d", i, v)
			}
		}
		f, b := d.Float(), d.Bool()
		if err := d.End(); err != nil {
			return err
		}
		if !damaged && (len(got) != 2 || got[0] != long || got[1] != "short" || f != 1.5 || !b) {
			t.Fatalf("read %d strings, %v, %v", len(got), f, b)
		}
		return nil
	}
	for name, r := range map[string]func([]byte) io.Reader{
		"whole":          func(b []byte) io.Reader { return bytes.NewReader(b) },
		"byte by byte":   func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"half at a time": func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
	} {
		d, err := OpenReader(r(good), len(good), "TEST", 3, "a test copy")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := decode(d, false); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-20] ^= 0x01 // in a value: decodes, then fails its checksum
	for name, tc := range map[string]struct {
		b    []byte
		size int
		want string
	}{
		"a flipped bit":       {flipped, len(flipped), "checksum mismatch"},
		"cut short":           {good[:len(good)-9], len(good), "unexpected EOF"},
		"a longer size":       {append(bytes.Clone(good), 7), len(good) + 1, "bytes past the end"},
		"another magic":       {append([]byte("NOPE"), good[4:]...), len(good), "not a test copy"},
		"smaller than a head": {good[:6], 6, "not a test copy"},
	} {
		d, err := OpenReader(bytes.NewReader(tc.b), tc.size, "TEST", 3, "a test copy")
		if err == nil {
			err = decode(d, true)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A copy written to a writer is the copy Seal returns, handed over in
// windows as it is encoded; the writer's first error is End's.
func TestAWrittenCopyIsTheSealedCopy(t *testing.T) {
	encode := func(e *Encoder) {
		for i := range 40_000 {
			e.Uint(uint64(i))
			e.Int(-int64(i))
			e.Float(float64(i) / 3)
			e.Str(strings.Repeat("s", i%7))
			e.StrBytes([]byte("slot"))
			e.Bool(i%2 == 0)
		}
	}
	sealed := NewEncoder("TEST", 3, 0)
	encode(sealed)
	want := sealed.Seal()

	var got bytes.Buffer
	w := &countWrites{w: &got}
	written := NewWriterEncoder(w, "TEST", 3)
	encode(written)
	if err := written.End(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("written copy of %d bytes differs from the sealed copy of %d", got.Len(), len(want))
	}
	if w.largest > streamWindow+64 || w.writes < len(want)/(streamWindow+64) {
		t.Errorf("%d writes, the largest %d bytes: not handed over in windows", w.writes, w.largest)
	}
	if _, err := OpenReader(bytes.NewReader(got.Bytes()), got.Len(), "TEST", 3, "a test copy"); err != nil {
		t.Fatal(err)
	}

	failing := NewWriterEncoder(failWriter{}, "TEST", 3)
	encode(failing)
	if err := failing.End(); err != io.ErrShortWrite {
		t.Fatalf("End = %v, want the writer's error", err)
	}
}

type countWrites struct {
	w       io.Writer
	writes  int
	largest int
}

func (c *countWrites) Write(b []byte) (int, error) {
	c.writes++
	c.largest = max(c.largest, len(b))
	return c.w.Write(b)
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }
