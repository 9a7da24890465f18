// Package handlers acts on the deciders of handlers/decide.
//
// The Service carries a decide.Command out: it decides from the in-memory
// views, appends, and on a conflict waits for the views to show what was
// written first and decides again. Commands on one group run one at a time
// inside the process; across processes the store's expectations are the
// lock. Leadership (leadership.go) lets one replica act at a time.
//
// The reactors act on the cluster: each is a small struct with Name and
// Reconcile(ctx, slot) (requeueAfter, error), in a file named for it
// (boot.go, hosts.go, hostloss.go, ...), over the shared base of
// reactor.go. The controller (controller.go) runs them per slot from the
// work queue (queue.go); the Cluster interface (cluster.go) is what they
// read and change, handlers/kube its client-go implementation.
package handlers
