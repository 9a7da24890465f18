// Package eventlog is the claimstream event log on a NATS JetStream
// stream: appends, reads, backup and restore. It talks to JetStream as a
// client; the server it runs in is package natsserver.
//
// OpenStore opens (or creates) the stream. An append names the
// aggregate's last sequence as the writer saw it; the server refuses it if
// anything else landed there since (ErrConflict), so a decision made from a
// stale view cannot be written. Several writes of one decision are one
// atomic batch (AppendWrites, at most MaxEventsPerAppend events). An
// append whose answer is lost is sent again or read back before the caller
// hears of it (ErrOutcomeUnknown only when neither settles it); one fenced
// by a leadership epoch (Fenced) is refused once a newer leader was
// elected.
//
// Reads (Read, Tail, ReadAggregate, ReadFiltered, ReadDirect, Get) hand
// on every entry: one the reader cannot decode is counted (Stats) and
// passed with Data == nil. A sequence the stream cannot deliver ends the
// read with a GapError naming it (Gaps).
//
// LogHealth is the flag an append checks first: while the log cannot be
// written it is refused at once (ErrLogUnwritable). natsserver's
// LogMonitor sets it.
//
// WriteBackup, VerifyBackup and RestoreBackup copy the stream through
// JetStream's snapshot API; a restore that loses to another is told apart
// by JetStream's error codes (ErrRestoreRaced, ErrRestoreStalled,
// ErrRestoreNoPeers).
package eventlog
