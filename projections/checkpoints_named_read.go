package projections

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// maxNamedObject bounds what GetNamed reads into memory at once.
const maxNamedObject = 1 << 30

// GetNamed reads the object name of the checkpoint bucket into one buffer
// of its size (the object store's GetBytes grows its buffer by doubling:
// for a copy of tens of MB that is twice its size in garbage at start).
func (c *Checkpoints) GetNamed(ctx context.Context, name string) ([]byte, error) {
	r, err := c.obj.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %w", name, err)
	}
	defer r.Close()
	info, err := r.Info()
	if err != nil {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %w", name, err)
	}
	if info.Size > maxNamedObject {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %d bytes, more than %d", name, info.Size, maxNamedObject)
	}
	b := make([]byte, info.Size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %w", name, err)
	}
	// The reader checks the object's digest when it reaches the end.
	n, err := r.Read(make([]byte, 1))
	if n != 0 {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: longer than its size, %d bytes", name, info.Size)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s from the checkpoint bucket: %w", name, err)
	}
	return b, nil
}
