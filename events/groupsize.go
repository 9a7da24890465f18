package events

// Group-size events: appended to the group aggregate, with the group's
// expectation, in the same atomic batch as the claim events they sum up.
// Two writers in different processes that both judged maxSize or minSize
// on the same group state cannot both land: the second one's expectation
// no longer holds.
const (
	TypeSizeIncreased Type = "SizeIncreased"
	TypeSizeDecreased Type = "SizeDecreased"
)

// SizeIncreased: one call created Delta claims in the group (IncreaseSize,
// the built-in scaler's Decide, a manual claim): the demand as it was
// asked for, and the claims that answered it.
type SizeIncreased struct {
	Ref
	Delta       int      `json:"delta"`
	RequestedBy string   `json:"requestedBy"`
	Request     Request  `json:"request"`
	Claims      []string `json:"claims,omitempty"`
}

// SizeDecreased: one call took Delta claims out of the group's target
// (DecreaseTargetSize cancelled them, DeleteNodes cancelled or marked them
// for scale-down).
type SizeDecreased struct {
	Ref
	Delta       int      `json:"delta"`
	RequestedBy string   `json:"requestedBy"`
	Request     Request  `json:"request"`
	Claims      []string `json:"claims,omitempty"`
}

// EventType is SizeIncreased.
func (SizeIncreased) EventType() Type { return TypeSizeIncreased }

// EventType is SizeDecreased.
func (SizeDecreased) EventType() Type { return TypeSizeDecreased }
