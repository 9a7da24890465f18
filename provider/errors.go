package provider

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/decide"
)

// codeOf maps a decider's refusal to its gRPC code (0: not a refusal).
func codeOf(c decide.Code) codes.Code {
	switch c {
	case decide.CodeInvalidArgument:
		return codes.InvalidArgument
	case decide.CodeNotFound:
		return codes.NotFound
	case decide.CodeFailedPrecondition:
		return codes.FailedPrecondition
	case decide.CodeUnavailable:
		return codes.Unavailable
	case decide.CodeAborted:
		return codes.Aborted
	}
	return codes.OK
}

// toStatus turns an error of a command into a gRPC status: a refusal keeps
// its code and message; an append whose outcome is unknown is Unknown; a
// context error keeps its meaning (the write may still have landed);
// anything else is Internal, with the RPC and group.
func toStatus(op, group string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var he *decide.Error
	if errors.As(err, &he) {
		if c := codeOf(he.Code); c != codes.OK {
			return status.Error(c, he.Msg)
		}
	}
	switch {
	case errors.Is(err, eventlog.ErrOutcomeUnknown):
		// Not a refusal: the write may have landed. Unknown, never a code
		// that says nothing happened (Unavailable, FailedPrecondition,
		// Aborted); the views and TargetSize show what landed.
		return status.Errorf(codes.Unknown, "%s on group %s: %v", op, group, err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s on group %s: %v", op, group, err)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s on group %s: %v", op, group, err)
	}
	return status.Errorf(codes.Internal, "%s on group %s: %v", op, group, err)
}

// fail maps err and logs it: refusals at info (cluster-autoscaler acts on
// them), anything else at error.
func (s *Server) fail(ctx context.Context, op, group string, err error) error {
	st := toStatus(op, group, err)
	code := status.Code(st)
	switch {
	case errors.Is(err, eventlog.ErrOutcomeUnknown):
		s.log.ErrorContext(ctx, "provider write outcome unknown: it may have landed", "rpc", op, "group", group, "err", err)
	case code == codes.Internal || code == codes.Unknown:
		s.log.ErrorContext(ctx, "provider write failed", "rpc", op, "group", group, "err", err)
	default:
		s.log.InfoContext(ctx, "provider write refused", "rpc", op, "group", group, "code", code.String(), "msg", status.Convert(st).Message())
	}
	return st
}
