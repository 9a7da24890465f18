// Package handlers decides and acts.
//
// A Command decides: Decide(views, now) returns the writes that carry the
// decision out, each with the expectation of the aggregate it read, or a
// *Error (InvalidArgument, NotFound, FailedPrecondition, Unavailable) that
// says why nothing may change. Deciders are pure: no I/O, time only as an
// argument. commands.go holds the requests from outside (IncreaseSize,
// DecreaseTargetSize, DeleteNodes, manual claims, delete-claim,
// decommission); lifecycle.go the moves the reactors make (boot, ready,
// fail, deadline, complete, collect).
//
// The Service carries a command out: it decides from the in-memory views,
// appends, and on a conflict waits for the views to show what was written
// first and decides again. Commands on one group run one at a time inside
// the process; across processes the store's expectations are the lock.
package handlers
