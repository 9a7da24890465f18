package powercmd

import (
	"context"
	"fmt"

	"github.com/claimstream/claimstream/events"
)

// Reader reads a machine's power state in process through its slot's
// power driver (handlers.PowerReader), the credentials from the Secret
// the slot's Jobs mount.
type Reader struct {
	// Secret returns the data of the named Secret of the Jobs' namespace.
	Secret func(ctx context.Context, name string) (map[string][]byte, error)
}

// PowerStatus reads the state of the machine p switches: on, off or
// unknown, and the driver's name for it.
func (r Reader) PowerStatus(ctx context.Context, slot string, p *events.Power) (string, string, error) {
	var data map[string][]byte
	if p.CredentialsSecret != "" {
		var err error
		if data, err = r.Secret(ctx, p.CredentialsSecret); err != nil {
			return "", "", fmt.Errorf("slot %s: credentials Secret %s: %w", slot, p.CredentialsSecret, err)
		}
	}
	d, err := DriverFor(*p, data)
	if err != nil {
		return "", "", fmt.Errorf("slot %s: %w", slot, err)
	}
	rd, err := d.Status(ctx)
	if err != nil {
		return "", rd.ID, fmt.Errorf("slot %s: %w", slot, err)
	}
	return string(rd.State), rd.ID, nil
}
