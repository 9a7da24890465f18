package pool

import (
	"sync"
	"time"
)

// Why a pool file was not applied (FileState.Reason).
const (
	// ReasonInvalid: the file does not parse or does not validate.
	ReasonInvalid = "invalid"
	// ReasonRefused: the file is valid but the log refuses it (a group's
	// maxSize below its live claims, a slot with a live claim removed).
	ReasonRefused = "refused"
)

// FileState is what became of the last pool file serve read. While a
// file is refused the log keeps the pool it holds and serve goes on
// serving it, so the refusal is reported rather than fatal: in /readyz,
// the status ConfigMap and a Kubernetes Event.
type FileState struct {
	File    string `json:"file"`
	Applied bool   `json:"applied"`
	// Reason and Error say why the file was not applied.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// Since is when the file was applied or refused.
	Since time.Time `json:"since"`
	// Seq counts the outcomes reported, so that a reader acts once on each.
	Seq uint64 `json:"-"`
}

// FileReport holds the pool file's state for the readers that report it.
// The zero value is ready to use; a nil *FileReport reports nothing.
type FileReport struct {
	mu      sync.Mutex
	state   *FileState
	seq     uint64
	changed chan struct{}
}

// Set records an outcome: err nil is applied, else reason says why not.
func (r *FileReport) Set(file, reason string, err error, at time.Time) {
	if r == nil {
		return
	}
	st := &FileState{File: file, Applied: err == nil, Since: at.UTC()}
	if err != nil {
		st.Reason, st.Error = reason, err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != nil && r.state.Applied && st.Applied && r.state.File == st.File {
		return // the same file again: nothing new to report
	}
	r.seq++
	st.Seq = r.seq
	r.state = st
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// Clear forgets the last outcome: nothing is known to be wrong with the
// file here (a follower's file that loads again; the leader applies it).
func (r *FileReport) Clear() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		return
	}
	r.state = nil
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// State is a copy of the last outcome, or nil before the first.
func (r *FileReport) State() *FileState {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		return nil
	}
	st := *r.state
	return &st
}

// Refused reports whether the last file read was not applied.
func (r *FileReport) Refused() bool {
	st := r.State()
	return st != nil && !st.Applied
}

// Changed is closed at the next Set that changes the state. A nil report
// never changes.
func (r *FileReport) Changed() <-chan struct{} {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}
