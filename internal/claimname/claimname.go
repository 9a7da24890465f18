// Package claimname is the rule a claim's name follows, <slot>-<6 hex>
// (the slot's name cut to 40 characters), and a list of a slot's claim
// names that holds each such name in 4 bytes. The indexes behind the cost
// report and the dashboard keep every claim of a month by slot, so at
// 10,000 slots a string each would be a large part of each index.
package claimname

import "strings"

// MaxBase is how much of the slot's name a claim's name keeps: claim
// names end up in Job names and labels.
const MaxBase = 40

// Base is the part of a claim's name taken from its slot.
func Base(slot string) string {
	if len(slot) > MaxBase {
		return strings.TrimRight(slot[:MaxBase], ".-")
	}
	return slot
}

// Of is the name of slot's claim of suffix (its low 24 bits, as six hex
// digits).
func Of(slot string, suffix uint32) string {
	return string(AppendOf(nil, slot, suffix))
}

// AppendOf appends Of(slot, suffix) to dst.
func AppendOf(dst []byte, slot string, suffix uint32) []byte {
	const digits = "0123456789abcdef"
	dst = append(dst, Base(slot)...)
	dst = append(dst, '-')
	for shift := 20; shift >= 0; shift -= 4 {
		dst = append(dst, digits[suffix>>shift&0xf])
	}
	return dst
}

// Pack is the suffix of claim when it is named by the rule for slot.
func Pack(slot, claim string) (uint32, bool) {
	base := Base(slot)
	if len(claim) != len(base)+7 || claim[len(base)] != '-' || claim[:len(base)] != base {
		return 0, false
	}
	var v uint32
	for i := len(base) + 1; i < len(claim); i++ {
		c := claim[i]
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | uint32(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | uint32(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// Names are one slot's claim names, in order: 4 bytes for a name the
// rule made, a string for any other.
type Names struct {
	// refs are suffixes, or other|i for others[i].
	refs   []uint32
	others []string
}

const other = 1 << 31

// Len is how many names n holds.
func (n *Names) Len() int { return len(n.refs) }

// At is the i-th name of slot's claims.
func (n *Names) At(slot string, i int) string {
	r := n.refs[i]
	if r&other != 0 {
		return n.others[r&^other]
	}
	return Of(slot, r)
}

// AppendAt appends the i-th name to dst.
func (n *Names) AppendAt(dst []byte, slot string, i int) []byte {
	r := n.refs[i]
	if r&other != 0 {
		return append(dst, n.others[r&^other]...)
	}
	return AppendOf(dst, slot, r)
}

// Is says whether the i-th name is claim, without making the name.
func (n *Names) Is(slot string, i int, claim string) bool {
	r := n.refs[i]
	if r&other != 0 {
		return n.others[r&^other] == claim
	}
	v, ok := Pack(slot, claim)
	return ok && v == r
}

// Append adds claim, of slot.
func (n *Names) Append(slot, claim string) {
	if v, ok := Pack(slot, claim); ok {
		n.refs = append(n.refs, v)
		return
	}
	n.refs = append(n.refs, other|uint32(len(n.others)))
	n.others = append(n.others, claim)
}

// DropFirst drops the first k names, keeping no room to spare.
func (n *Names) DropFirst(k int) {
	k = min(max(k, 0), len(n.refs))
	kept := n.refs[k:]
	refs := make([]uint32, len(kept))
	var others []string
	for i, r := range kept {
		if r&other != 0 {
			r = other | uint32(len(others))
			others = append(others, n.others[kept[i]&^other])
		}
		refs[i] = r
	}
	n.refs, n.others = refs, others
}

// Clip drops the room n holds beyond its names.
func (n *Names) Clip() {
	if cap(n.refs) > len(n.refs) {
		n.refs = append(n.refs[:0:0], n.refs...)
	}
}
