package eventlog

import (
	"context"
	"errors"
	"fmt"
)

// guardAppend refuses at once while the log is known unwritable, and
// otherwise returns a ctx that ends as soon as it turns unwritable.
func (s *Store) guardAppend(ctx context.Context) (context.Context, func(), error) {
	h := s.cfg.Health
	if h == nil {
		return ctx, func() {}, nil
	}
	if err := h.Err(); err != nil {
		h.failed(WriteFailureUnwritable)
		return ctx, nil, fmt.Errorf("append to %s: %w", s.cfg.Stream, err)
	}
	gctx, release := h.guard(ctx)
	return gctx, release, nil
}

// Unwritable is the refusal an append gets while the log is known
// unwritable (ErrLogUnwritable), or nil.
func (s *Store) Unwritable() error {
	if err := s.cfg.Health.Err(); err != nil {
		return fmt.Errorf("append to %s: %w", s.cfg.Stream, err)
	}
	return nil
}

// appendFailed counts a failed append by reason and, when the guard ended
// it, returns the refusal (the log turned unwritable) instead of the bare
// context error. Conflicts are answers, not failures.
func (s *Store) appendFailed(ctx context.Context, err error) error {
	h := s.cfg.Health
	if h == nil || errors.Is(err, ErrConflict) {
		return err
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrLogUnwritable) {
		err = fmt.Errorf("append to %s: %w", s.cfg.Stream, cause)
	} else if fault := h.faultDuring(ctx); fault != nil {
		err = fmt.Errorf("append to %s: %w (%v)", s.cfg.Stream, fault, err)
	} else if errors.Is(err, context.Canceled) {
		return err // the caller gave up: not the log's failure
	}
	h.failed(classifyWriteFailure(err))
	return err
}
