package cost

import (
	"encoding/binary"

	"github.com/claimstream/claimstream/internal/chunkfile"
)

// The index's owners (a slot, its claim and who asked) are records of
// ownerSize bytes in chunks of chunkSpans, written once and looked up by
// their number: every span and boot mark names one, and only a report or
// a copy reads them. A full chunk goes to the history file as the spans'
// do; a report reads back the chunks it needs once (ownerReader). Folding
// an event reads none: lastOwner keeps what it compares.

// ownerSize is an owner's record: its claim, slot and requester,
// little-endian.
const ownerSize = 12

func (o owner) appendTo(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, o.claim)
	b = binary.LittleEndian.AppendUint32(b, o.slot)
	return binary.LittleEndian.AppendUint32(b, o.requester)
}

// ownerAt is the i-th record of a chunk's bytes.
func ownerAt(b []byte, i int) owner {
	b = b[i*ownerSize : (i+1)*ownerSize]
	return owner{claim: binary.LittleEndian.Uint32(b), slot: binary.LittleEndian.Uint32(b[4:]), requester: binary.LittleEndian.Uint32(b[8:])}
}

// lastOwned is a slot's newest owner of one kind (Index.lastOwner): its
// number + 1 (0: none), and what a new owner is compared with.
type lastOwned struct {
	id               uint32
	claim, requester uint32
}

// addOwner appends o, in a new chunk when the last is full, and returns
// its number.
func (x *Index) addOwner(o owner) uint32 {
	if x.nowners%x.chunkSpans == 0 {
		if len(x.owners) > 0 {
			x.store(&x.owners[len(x.owners)-1])
		}
		x.owners = append(x.owners, chunkfile.Chunk{B: make([]byte, 0, x.chunkSpans*ownerSize)})
	}
	c := &x.owners[len(x.owners)-1]
	c.B = o.appendTo(c.B)
	x.nowners++
	return uint32(x.nowners - 1)
}

// ownerReader looks owners up for one report: the chunks it reads back
// from the history file stay with it until the report is done, so each
// is read once.
type ownerReader struct {
	x      *Index
	chunks [][]byte
}

func (r *ownerReader) owner(o uint32) (owner, error) {
	x := r.x
	c, i := int(o)/x.chunkSpans, int(o)%x.chunkSpans
	if b := x.owners[c].B; b != nil {
		return ownerAt(b, i), nil
	}
	if r.chunks == nil {
		r.chunks = make([][]byte, len(x.owners))
	}
	if r.chunks[c] == nil {
		var b []byte
		if _, err := x.chunkBytes(&x.owners[c], "owners", c, &b); err != nil {
			return owner{}, err
		}
		r.chunks[c] = b
	}
	return ownerAt(r.chunks[c], i), nil
}
