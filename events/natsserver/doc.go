// Package natsserver runs the NATS server that holds the claimstream event
// log inside the process: StartEmbedded starts nats-server with JetStream
// on a data dir and connects the process's own client to it.
//
// One process owns a data dir (LockDataDir; ErrDataDirInUse names the
// other process). ClusterConfig joins the server to its peers over routes
// (optionally TLS), ClusterAdmin retries the stream and bucket creates a
// forming cluster leaves unanswered, and ClusterStatus says whether the
// log has a quorum and a leader.
//
// Access decides who else may connect: the process alone by default, or
// read-only subscribers in their own account that read copies of the
// streams (SubscriberCopies) and may never write, delete or drive the
// process's consumers. AuthFailures counts and logs refused logins.
//
// LogMonitor watches the server and its disk, keeps the eventlog.LogHealth
// flag the store checks before each append, and restarts JetStream once a
// fault a restart would cure has held for RestartAfter.
package natsserver
