// Package events is the claimstream event log: the catalog of event types,
// the CloudEvents envelope they travel in, and the store on a NATS
// JetStream stream.
//
// Every event belongs to one aggregate, a slot (with its claims) or a
// group, and lands on the subject <prefix>.<kind>.<name>.<Type>. An append
// names the aggregate's last sequence as the writer saw it; the server
// refuses it if anything else landed there since (ErrConflict), so a
// decision made from a stale view cannot be written. Several writes of one
// decision are one atomic batch.
//
// The store never crashes on what it reads: an entry of an unknown type or
// with undecodable data is counted (Stats), logged and handed on with
// Data == nil so the reader can account for its sequence and go on.
//
// docs/events.md is the catalog in prose.
package events
