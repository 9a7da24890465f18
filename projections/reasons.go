package projections

// FailureReasons are the reasons a ClaimFailed carries, every one the code
// writes (the metrics show each at zero from start, so an alert on one
// has a series before the first failure of its kind).
var FailureReasons = []string{
	ReasonDeadlineExceeded,
	ReasonStartupJobFailed,
	ReasonJobTimeout,
	ReasonReadinessGateTimeout,
	ReasonMachineGone,
	ReasonAttemptLimitReached,
	ReasonSuperseded,
	ReasonSlotDeleted,
	ReasonDeletedByHand,
	ReasonDecommissioned,
	ReasonNodeDeleted,
	ReasonHostLost,
}
