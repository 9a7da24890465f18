package powercmd

import "github.com/claimstream/claimstream/internal/power"

// The command's exit codes, one per failure an operator acts on
// differently, so that a Job's exit code alone tells them apart.
const (
	ExitFailed           = 1 // any other failure
	ExitUsage            = 2 // bad flags or configuration, a credentials file missing
	ExitWrongCredentials = 3
	ExitUnreachable      = 4
	ExitStateNotReached  = 5
	ExitUnsupported      = 6
)

// ExitError is a failure of the command with the exit code its kind
// maps to; cmd/claimstream exits with Code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// exitCode maps a driver's failure to its exit code by its reason.
func exitCode(err error) int {
	switch power.Reason(err) {
	case "WrongCredentials":
		return ExitWrongCredentials
	case "Unreachable":
		return ExitUnreachable
	case "StateNotReached":
		return ExitStateNotReached
	case "Unsupported":
		return ExitUnsupported
	}
	return ExitFailed
}
