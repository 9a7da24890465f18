package decide

import (
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// deleteFailedInstance is DeleteNodes on a slot with no live claim: if the
// slot's failed claim is still listed to cluster-autoscaler as a failed
// instance (projections.ListedFailure), the deletion is recorded
// (FailedInstanceDeleted) and the instance leaves NodeGroupNodes, as a
// cloud provider's deleted instance does. cluster-autoscaler deletes a
// failed instance once after its backoff; listing it on would make it
// delete it again every loop. Anything else is a no-op.
func deleteFailedInstance(s *projections.State, slot string, now time.Time, req events.Request, by, cause string) (events.Write, bool) {
	cl := s.ListedFailure(slot, now)
	if cl == nil {
		return events.Write{}, false
	}
	return slotWrite(s, slot, now, events.FailedInstanceDeleted{Ref: claimRef(cl, cause), RequestedBy: by, Request: req}), true
}
