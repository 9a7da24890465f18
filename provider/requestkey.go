package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
)

// requestKeys gives each IncreaseSize the key that identifies it among its
// retries (the request has no id field; decide.IncreaseSize.RequestKey).
//
// A call whose gRPC metadata carries a W3C traceparent is keyed by its
// trace id, group and delta: a client's retry reuses its call's trace, on
// any replica. A call without one can only be told from a new request by
// what this replica answered: a client retries a call it did not see
// succeed. So it takes the key of the last call of the same caller, group
// and delta when that call ended within events.RequestRepeatWindow without
// a success its caller could see (an error, an unknown outcome, an answer
// after its deadline), or is still running past its caller's deadline;
// otherwise (no such call, a timely success or refusal, a concurrent call
// within its deadline) it gets a fresh key.
type requestKeys struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	last map[string]*keyedCall // by caller, group and delta
}

// keyedCall is the last call of one caller, group and delta.
type keyedCall struct {
	key string
	ctx context.Context // while running
	// ended: when it was answered (zero while running); seen: the answer
	// was a success or a refusal given within the caller's deadline.
	ended time.Time
	seen  bool
}

func newRequestKeys(clk clock.PassiveClock) *requestKeys {
	return &requestKeys{clock: clk, last: map[string]*keyedCall{}}
}

// begin returns the key of a call and the func to call with its outcome.
func (k *requestKeys) begin(ctx context.Context, requester, group string, delta int32) (string, func(error)) {
	suffix := " " + group + " +" + strconv.Itoa(int(delta))
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, tp := range md.Get("traceparent") {
			if id, ok := traceIDOf(tp); ok {
				return "trace " + id + suffix, func(error) {}
			}
		}
	}
	base := "caller " + requester + suffix
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	for b, c := range k.last {
		if !c.ended.IsZero() && now.Sub(c.ended) >= events.RequestRepeatWindow {
			delete(k.last, b)
		}
	}
	c := k.last[base]
	retry := c != nil && (c.ended.IsZero() && c.ctx.Err() != nil || !c.ended.IsZero() && !c.seen)
	if !retry {
		c = &keyedCall{key: base + " #" + nonce()}
		k.last[base] = c
	}
	c.ctx, c.ended, c.seen = ctx, time.Time{}, false
	return c.key, func(err error) {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.last[base] != c || c.ctx != ctx {
			return // a later call took the entry over
		}
		c.ctx, c.ended = nil, k.clock.Now()
		c.seen = ctx.Err() == nil && (err == nil || decide.CodeOf(err) != 0)
	}
}

func nonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// traceIDOf is the trace id of a W3C traceparent ("00-<32 hex>-<16 hex>-
// <2 hex>"; a later version may append fields), false when it is not
// one: a malformed or all-zero id identifies nothing.
func traceIDOf(tp string) (string, bool) {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", false
	}
	if parts[0] == "00" && len(parts) != 4 {
		return "", false
	}
	for _, p := range parts[:4] {
		if !isLowerHex(p) {
			return "", false
		}
	}
	if strings.Trim(parts[1], "0") == "" || strings.Trim(parts[2], "0") == "" {
		return "", false
	}
	return parts[1], true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
