// Package decide holds the deciders: pure functions from the views
// (projections.State) and a time to the writes that carry a decision out.
//
// Every decider is a Command: LockKey names the group it serializes on,
// Decide returns the writes, each with the expectation of the aggregate it
// read, or a *Error (CodeInvalidArgument, CodeNotFound,
// CodeFailedPrecondition, CodeUnavailable) saying why nothing may change.
// No writes and no error is a no-op: a decider acts only on the shape it
// expects, so a repeated call decides nothing twice. Deciders do no I/O and
// read the time only from their argument; the package imports the standard
// library, events and projections, and internal/claimname for claim names.
//
// A claim moves through these phases (projections.Phase):
//
//	pending   IncreaseSize or ManualClaim makes it on a free slot
//	booting   BootClaim: its attempt and startup Job (JobName)
//	ready     MarkReady: its machine passed the readiness gate
//	failed    FailClaim, FailInPhase, ExpireDeadline (deadline passed in
//	          the boot window), BootClaim past the attempt bound
//	completed CompleteClaim: its scale-down landed (the machine is
//	          observed off) or its machine was removed by hand
//
// DecreaseTargetSize cancels pending claims and never touches a booting or
// ready one; DeleteNodes and DeleteClaim cancel a pending claim and mark a
// booting or ready one for scale-down; StartDrain, TimeOutDrain,
// FireShutdown and LimitShutdown record the drain and shutdown that follow.
// CollectClaim drops a terminal claim from the live views once its TTL
// passed (its history stays in the log). Decommission takes a slot out of
// service, ending its live claim on the same write; Recommission puts it
// back.
//
// The facts the reactors observe are recorded by deciders too: ObserveNode
// (a slot's Node and whether its machine is PoweredOn), ObserveJob (a
// lifecycle Job the cluster showed), ObserveMachine (a ready claim's
// machine-gone clock), ExpectHost, JoinHost and RefuseHost (elastic
// hosts), FireSlotShutdown and PauseSlotShutdown (the input law: a machine
// up with no claim is shut down), RequestNodeDelete (the Node of a machine
// switched off).
//
// The calls on a group's size (IncreaseSize, DecreaseTargetSize,
// DeleteNodes) are ScaleRequesters: the ScaleRequested they carry is
// written in the same append as their decision.
package decide
