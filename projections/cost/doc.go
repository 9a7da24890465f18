// Package cost answers "what did the pool cost" from the event log: a pure
// fold over events (Fold) that accrues, for a window, machine-seconds,
// boot-seconds, energy and money by group, slot, requester or claim, and
// the up-time no claim wanted with the reason it stayed up. docs/cost.md
// says how each number is computed.
//
// The files: fold.go (the state folded from events), accrue.go (the
// segments of a slot's attribution and what one second of them costs),
// report.go (the rows a report shows), window.go (the period a report
// covers, parsed from operator input), index.go (the fold kept as compact
// spans, so a report of any period is a walk over them: what serve's GET
// /api/v1/cost answers from), index_spans.go and index_owners.go (its
// spans, boot marks and owners in chunks), history.go (the full chunks in
// a history file).
//
// Runner (runner.go) keeps that index current for serve: it is a
// projection of the views' runner, folded with the views event by event
// and saved as a part of their snapshots (index_codec.go), so a start
// continues from the snapshot and reads the log's history once.
package cost
