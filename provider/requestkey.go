package provider

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
)

// requestKey identifies an IncreaseSize among its retries (the request has
// no id field): the W3C trace id of the incoming traceparent when the
// caller sent one (a client's retry reuses its call's trace), else the
// caller, both with the group and the delta. A call with the key of one
// the group accepted within events.RequestRepeatWindow is its retry.
func requestKey(ctx context.Context, requester, group string, delta int32) string {
	d := strconv.Itoa(int(delta))
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, tp := range md.Get("traceparent") {
			if id, ok := traceIDOf(tp); ok {
				return "trace " + id + " " + group + " +" + d
			}
		}
	}
	return "caller " + requester + " " + group + " +" + d
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
