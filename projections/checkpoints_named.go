package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// NamedObject is an object of the checkpoint bucket other than the views'
// checkpoints (such as a saved copy of the cost index): its name, headers
// and size.
type NamedObject struct {
	Name    string
	Headers map[string]string
	Size    uint64
}

// PutNamed stores b as the object name, with headers, in the checkpoint
// bucket (and its replicas). name must not start with the views'
// checkpoint prefix.
func (c *Checkpoints) PutNamed(ctx context.Context, name string, headers map[string]string, b []byte) error {
	if strings.HasPrefix(name, checkpointPrefix) {
		return fmt.Errorf("object %s: the prefix %s is the views' checkpoints'", name, checkpointPrefix)
	}
	h := map[string][]string{}
	for k, v := range headers {
		h[k] = []string{v}
	}
	if _, err := c.obj.Put(ctx, jetstream.ObjectMeta{Name: name, Headers: h}, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("write %s to the checkpoint bucket: %w", name, err)
	}
	return nil
}

// ListNamed lists the objects of the checkpoint bucket whose names start
// with prefix, in the bucket's order.
func (c *Checkpoints) ListNamed(ctx context.Context, prefix string) ([]NamedObject, error) {
	infos, err := c.obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the checkpoint bucket: %w", err)
	}
	var out []NamedObject
	for _, in := range infos {
		if !strings.HasPrefix(in.Name, prefix) {
			continue
		}
		h := map[string]string{}
		for k := range in.Headers {
			h[k] = in.Headers.Get(k)
		}
		out = append(out, NamedObject{Name: in.Name, Headers: h, Size: in.Size})
	}
	return out, nil
}

// DeleteNamed removes the object name of the checkpoint bucket.
func (c *Checkpoints) DeleteNamed(ctx context.Context, name string) error {
	if err := c.obj.Delete(ctx, name); err != nil {
		return fmt.Errorf("delete %s from the checkpoint bucket: %w", name, err)
	}
	return nil
}

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
