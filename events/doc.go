// Package events is the claimstream event vocabulary: the catalog of event
// types, the aggregates they belong to, the subjects they land on and the
// CloudEvents envelope they travel in. It holds no store and no server, so
// the deciders and the folds build on it alone.
//
// Every event belongs to one aggregate, a slot (with its claims) or a
// group, and lands on the subject <prefix>.<kind>.<name>.<Type>
// (Subjects). Event.Encode writes the binary-mode envelope (headers and
// data); FromMsg reads one back and never fails: an entry of an unknown
// type or with undecodable data comes back with Data == nil and Err set,
// so the reader can account for its sequence and go on.
//
// The log itself is package eventlog; the embedded NATS server that holds
// it is package natsserver. docs/events.md is the catalog in prose.
package events
