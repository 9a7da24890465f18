package decide

import (
	"errors"
	"fmt"
)

// Code classifies a refusal; each maps to one gRPC code (provider) and one
// HTTP status (REST).
type Code int

const (
	// CodeInvalidArgument: the command itself is malformed (delta <= 0,
	// no nodes). gRPC InvalidArgument.
	CodeInvalidArgument Code = iota + 1
	// CodeNotFound: an unknown group, slot, node or claim. gRPC NotFound.
	CodeNotFound
	// CodeFailedPrecondition: the pool's declarations forbid it (maxSize,
	// minSize, no free slot, decommissioned). Not worth retrying as is.
	CodeFailedPrecondition
	// CodeUnavailable: not possible now, possible later without anybody
	// changing anything (every live claim is past the cancelable phase).
	// cluster-autoscaler retries it.
	CodeUnavailable
	// CodeAborted: the command kept meeting concurrent writes; retry.
	CodeAborted
)

func (c Code) String() string {
	switch c {
	case CodeInvalidArgument:
		return "InvalidArgument"
	case CodeNotFound:
		return "NotFound"
	case CodeFailedPrecondition:
		return "FailedPrecondition"
	case CodeUnavailable:
		return "Unavailable"
	case CodeAborted:
		return "Aborted"
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is a decider's refusal: nothing was written.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Refuse is a refusal with code and a message formatted from format and
// args, returned by a decider that writes nothing.
func Refuse(code Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf returns the refusal code of err, or 0 for any other error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
