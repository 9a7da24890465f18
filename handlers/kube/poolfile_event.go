package kube

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kevents "k8s.io/client-go/tools/events"

	"github.com/claimstream/claimstream/handlers/pool"
)

// Reasons of the Events about the pool file.
const (
	ReasonPoolFileRefused = "PoolFileRefused"
	ReasonPoolFileApplied = "PoolFileApplied"
)

// recordPoolFile records an Event on serve's Pod for each outcome of the
// pool file from now until ctx ends: the one already there when the
// recorder starts too, since a file refused at start is read before the
// reports run. An applied file is recorded only after a refused one.
func (r *EventRecorder) recordPoolFile(ctx context.Context, rec kevents.EventRecorder) {
	if r.cfg.PoolFile == nil || r.cfg.Pod.Name == "" {
		return
	}
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Namespace: r.cfg.Pod.Namespace, Name: r.cfg.Pod.Name}}
	var seen uint64
	refused := false
	for {
		changed := r.cfg.PoolFile.Changed()
		if st := r.cfg.PoolFile.State(); st != nil && st.Seq != seen {
			seen = st.Seq
			switch {
			case !st.Applied:
				refused = true
				rec.Eventf(pod, nil, corev1.EventTypeWarning, ReasonPoolFileRefused, "ApplyPoolFile", "%s", poolFileNote(st))
			case refused:
				refused = false
				rec.Eventf(pod, nil, corev1.EventTypeNormal, ReasonPoolFileApplied, "ApplyPoolFile", "%s", poolFileNote(st))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// poolFileNote says what became of the file, within the API's limit.
func poolFileNote(st *pool.FileState) string {
	note := "pool file " + st.File + " applied"
	if !st.Applied {
		note = "pool file " + st.File + " not applied (" + st.Reason + "); serving the pool the log holds until a valid file is written: " + st.Error
	}
	if len(note) > maxNote {
		note = strings.ToValidUTF8(note[:maxNote-3], "") + "..."
	}
	return note
}
