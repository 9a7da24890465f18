// Package timeline is the timeline read model: each slot's phases over a
// window as intervals, the body of GET /api/v1/timeline (Timeline).
//
// Two ways make one. Build folds the log over the window from the views
// replayed at its start (the nearest checkpoint, then the tail); it reads
// every event of the window. Index keeps each slot's phase intervals of
// the last MaxWindow in memory, so a request cuts its window out of them
// instead (Index.Timeline); a window that reaches before what the index
// holds is answered by Build, and both answer the same window alike.
//
// What the index holds (index.go): per slot, its closed intervals as a
// stream of varints (bars.go), its open interval, its claims and its
// failed claims; the instants of the events folded, for a window's count
// (instants.go); a table of phase codes. Intervals that ended more than
// MaxWindow before the newest event are dropped.
//
// How it follows the views (follow.go): Index.Run builds the index with
// views of its own (from a saved copy, a checkpoint older than any window,
// or the log's start) up to the views' runner, then lets them go and
// applies a record of each event the runner folds, taken from the
// runner's views right after the fold. When it loses its place in the
// records (views replaced, too far behind), it builds again. A request
// first applies the records Run has not applied yet.
//
// Its saved copy (copies.go, codec.go): with KeepCopies, Run saves the
// index every so many events and at shutdown, beside the views'
// checkpoints (projections.IndexCopies), and a start continues from the
// newest copy the log still reaches. A copy is a magic, a version, the
// payload (varints; the views as their checkpoint JSON) and a CRC-32C; a
// damaged or foreign one is passed over for an older one or the log.
package timeline
