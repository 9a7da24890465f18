// Package projections folds the event log into the views every decision
// reads.
//
// # The fold
//
// Evolve(state, event) applies one event. It is deterministic and does no
// I/O: the same log always gives the same State, byte for byte (Canonical),
// whether it was folded in one go (Rebuild), incrementally as events arrived
// (Runner), or from a snapshot plus the tail. The rules are a table, moves,
// with one entry per event type; each entry either applies the event or
// refuses it with a *RefusedError and changes nothing but the sequences. A
// refusal is not a failure of the fold: the log is the record, the event
// stays in it, and the views report it in Stats.Refused.
//
// The phase table of a claim (docs/design.md) is legalMoves:
//
//	pending -> booting | completed | failed
//	booting -> ready | failed
//	ready   -> completed | failed
//
// failed and completed are terminal. The empty phase reads as pending.
//
// # Views
//
// State holds Groups, Slots and Claims, each with the stream sequence of the
// last event of its aggregate (Slot.Seq, Group.Seq): the expectation the next
// append to it must carry. A claim keeps its timeline (one Step per event);
// a slot keeps the digest of its newest claim (LastClaim), which survives the
// claim's collection.
//
// # Queries
//
// Two questions are kept apart, as the seed insists:
//
//   - LiveOfSlot: the slot's newest live claim, including one marked for
//     scale-down (it still owns the slot). ClaimedSlots asks this.
//   - WantsMachine: live and not marked. TargetSize counts this; the input
//     law asks it.
//
// InBootWindow (pending or booting) is where the deadline and the attempt
// bound apply; a ready claim is never failed by the boot deadline, and the
// booting -> ready move clears DeadlineAt. NextAttempt seeds a new claim's
// attempt from the digest; FreeSlots are the slots IncreaseSize may take (no
// live claim, not decommissioned, not resting after MaxConsecutiveAttempts
// failed boots). SlotPhase derives the reported phase (off, pending,
// booting, ready, draining, decommissioned); nothing decides from it.
//
// # Numbers
//
// constants.go holds every number of docs/design.md. The boot budget is the sum
// of BudgetConstants: the startup Job timeout (5m), the Job monitor's poll
// (30s), the registration wait (90s), the readiness gate (4m), one uncordon
// retry at its ceiling (10s) and a margin (1m): 12m10s. The three lifecycle
// timeouts are per group (events.Lifecycle) and the budget grows with them.
// DeadlineAt = requestedAt + max(budget, maxNodeProvisionTime), so the
// provider never declares a claim dead while cluster-autoscaler still waits.
//
// # Runner
//
// A Runner builds the views at start from the newest snapshot (a JetStream
// object store, written every 10,000 events) plus the tail of the log, then
// keeps folding as events arrive. Read gives one consistent State with the
// sequence it reflects; WaitFor blocks until the views reflect a sequence, so
// a writer reads its own writes.
//
// # Projections
//
// Other read models (the cost index, the timeline index) are Projections
// registered with the runner before Start: it folds each event once and
// hands it to every projection right after the views, under their lock.
// The snapshot frames the views and one part per projection
// (snapshotframe.go), so a start restores them all from it and reads the
// log after it once. A snapshot without a usable part for some projection
// makes the start fold the whole log for all, when the log still holds
// its start; over a log whose start expired the projection begins without
// that history. Checkpoints hold the views alone. A projection registered
// after Start is first built from the log up to the views.
package projections
