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
// How it follows the views: Index is a projection of the views' runner
// (projections.Projection). After each event the runner folds, under the
// views' lock, it hands the index a record of what a timeline shows of it
// (recordOf: the slot's phase and claim, a failure's reason), taken from
// the views right after the fold. The records wait in a short queue while
// a request holds the index, and whoever takes it next applies them.
//
// Its part of the views' snapshot (codec.go): a magic, a version, the
// payload (varints) and a CRC-32C; a start restores the index from it. A
// part that cannot be read makes the start fold the log from its start.
package timeline
