package projections

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// maxObjectSize bounds what readObject allocates from an object's
// recorded size: a damaged info record must not reserve the machine's
// memory.
const maxObjectSize = 4 << 30

// readObject reads the object name of obs whole, one chunk at a time.
//
// The object store's own Get delivers every chunk at once through a push
// consumer: the server's copies, its outbound buffers and the client's
// pending queue held about three copies of a snapshot while a start read
// it. Here one chunk is in flight and the object is assembled in one
// buffer of its recorded size; its size and SHA-256 digest are checked as
// Get checks them. An object replaced while it is read (a new snapshot's
// Put purges the old chunks) is read again from its new record.
func readObject(ctx context.Context, js jetstream.JetStream, obs jetstream.ObjectStore, name string) ([]byte, error) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		info, err := obs.GetInfo(ctx, name)
		if err != nil {
			return nil, err
		}
		b, err := readChunks(ctx, js, obs, info)
		if errors.Is(err, errObjectReplaced) && attempt < attempts {
			continue
		}
		return b, err
	}
}

var errObjectReplaced = errors.New("the object was replaced while it was read")

func readChunks(ctx context.Context, js jetstream.JetStream, obs jetstream.ObjectStore, info *jetstream.ObjectInfo) ([]byte, error) {
	if info.Opts != nil && info.Opts.Link != nil {
		return nil, fmt.Errorf("object %s is a link; claimstream writes none", info.Name)
	}
	if info.Size > maxObjectSize {
		return nil, fmt.Errorf("object %s records %d bytes, more than the %d a snapshot may hold", info.Name, info.Size, maxObjectSize)
	}
	want, err := jetstream.DecodeObjectDigest(info.Digest)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", info.Name, err)
	}
	buf := make([]byte, 0, info.Size)
	if info.Chunks > 0 {
		stream, err := js.Stream(ctx, "OBJ_"+info.Bucket)
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", info.Name, err)
		}
		subject := "$O." + info.Bucket + ".C." + info.NUID
		var seq uint64
		for got := uint32(0); got < info.Chunks; got++ {
			m, err := stream.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return nil, missingChunks(ctx, obs, info, got)
			}
			if err != nil {
				return nil, fmt.Errorf("object %s: chunk %d of %d: %w", info.Name, got+1, info.Chunks, err)
			}
			if uint64(len(buf))+uint64(len(m.Data)) > info.Size {
				return nil, fmt.Errorf("object %s: its chunks hold more than its recorded %d bytes", info.Name, info.Size)
			}
			buf = append(buf, m.Data...)
			seq = m.Sequence
		}
	}
	if uint64(len(buf)) != info.Size {
		return nil, fmt.Errorf("object %s: its chunks hold %d bytes, its record %d", info.Name, len(buf), info.Size)
	}
	if sum := sha256.Sum256(buf); !bytes.Equal(sum[:], want) {
		return nil, fmt.Errorf("object %s: %w", info.Name, jetstream.ErrDigestMismatch)
	}
	return buf, nil
}

// missingChunks is the error of an object whose bucket holds only got of
// its chunks: the object replaced (its record names other chunks now) or
// damaged.
func missingChunks(ctx context.Context, obs jetstream.ObjectStore, info *jetstream.ObjectInfo, got uint32) error {
	now, err := obs.GetInfo(ctx, info.Name)
	if errors.Is(err, jetstream.ErrObjectNotFound) || err == nil && now.NUID != info.NUID {
		return fmt.Errorf("object %s: %w", info.Name, errObjectReplaced)
	}
	return fmt.Errorf("object %s: the bucket holds %d of its %d chunks", info.Name, got, info.Chunks)
}
