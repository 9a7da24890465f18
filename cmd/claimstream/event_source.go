package main

import (
	"fmt"
	"os"
	"strings"

	cetypes "github.com/cloudevents/sdk-go/v2/types"
)

// eventSourceHelp is the --event-source flag's help.
const eventSourceHelp = "CloudEvents source of the events this installation writes (default /claimstream/<namespace> in a cluster, /claimstream/<hostname> with the simulator)"

// eventSource is the CloudEvents source stamped on every event serve
// writes: --event-source, else one naming the installation, so that two
// clusters' events differ in a shared sink or archive.
func eventSource(o serveOptions) (string, error) {
	src := o.eventSource
	if src == "" {
		name := o.cluster.namespace
		if o.cluster.simulated() || name == "" {
			if h, err := os.Hostname(); err == nil && h != "" {
				name = h
			}
		}
		src = "/claimstream"
		if name != "" {
			src += "/" + name
		}
	}
	u := cetypes.ParseURIRef(src)
	if src == "" || strings.ContainsAny(src, " \t\r\n") || u == nil {
		return "", fmt.Errorf("--event-source %q: want a URI reference such as /claimstream/prod-eu (no spaces)", src)
	}
	// Events carry the source as the SDK writes it, and readers refuse one
	// in another form: what is stamped is exactly what was given.
	if w := u.String(); w != src {
		return "", fmt.Errorf("--event-source %q: events would carry it as %q; give it in that form", src, w)
	}
	return src, nil
}
