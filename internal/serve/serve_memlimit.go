package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupRoot is where a container sees its own cgroup.
const cgroupRoot = "/sys/fs/cgroup"

// The cgroup files that hold a container's memory limit: cgroup v2, then v1.
const (
	cgroupV2MemoryMax = "memory.max"
	cgroupV1Limit     = "memory/memory.limit_in_bytes"
)

// memoryLimitShare is the part of the container's memory limit serve's Go
// runtime aims to stay under; the rest is room for what the runtime does
// not count (the binary's pages, thread stacks) and for a burst while the
// collector catches up.
const memoryLimitShare = 0.9

// cgroupUnlimited: cgroup v1 writes "no limit" as the largest page-aligned
// int64; anything from 2^62 up is no limit a container was given.
const cgroupUnlimited = 1 << 62

// parseCgroupMemoryLimit reads a cgroup memory limit file's content: a
// byte count, or "max" (cgroup v2) for none. ok is false when there is no
// limit.
func parseCgroupMemoryLimit(content string) (limit int64, ok bool, err error) {
	s := strings.TrimSpace(content)
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("not a byte count or \"max\": %q", truncate(s, 40))
	}
	if n == 0 {
		return 0, false, errors.New("a limit of 0 bytes")
	}
	if n >= cgroupUnlimited {
		return 0, false, nil
	}
	return int64(n), true, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// containerMemoryLimit is the memory limit of the cgroup root holds (v2,
// else v1); ok is false when there is none or no cgroup file.
func containerMemoryLimit(root fs.FS) (limit int64, ok bool, err error) {
	for _, name := range []string{cgroupV2MemoryMax, cgroupV1Limit} {
		b, err := fs.ReadFile(root, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", name, err)
		}
		limit, ok, err := parseCgroupMemoryLimit(string(b))
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", name, err)
		}
		return limit, ok, nil
	}
	return 0, false, nil
}

// applyContainerMemoryLimit gives the Go runtime a soft memory limit of
// memoryLimitShare of the container's memory limit, so that near the
// limit the collector works harder instead of the kernel killing serve.
// GOMEMLIMIT, when set, is the operator's choice and is left alone. The
// limit must stay above what a start needs (a limit below the start's
// peak keeps the collector running through JetStream's recovery); without
// a container limit, nothing is set. It returns
// the limit set (0: none).
func applyContainerMemoryLimit(log *slog.Logger, root fs.FS, getenv func(string) string) int64 {
	if v := getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory limit from GOMEMLIMIT", "limit", v)
		return 0
	}
	limit, ok, err := containerMemoryLimit(root)
	if err != nil {
		log.Warn("the container's memory limit cannot be read; serve sets no soft memory limit", "err", err)
		return 0
	}
	if !ok {
		return 0
	}
	soft := int64(math.Floor(float64(limit) * memoryLimitShare))
	debug.SetMemoryLimit(soft)
	log.Info("soft memory limit from the container's", "container_limit_mib", limit>>20, "soft_limit_mib", soft>>20)
	return soft
}

// applyMemoryLimit is applyContainerMemoryLimit for this process.
func applyMemoryLimit(log *slog.Logger) {
	applyContainerMemoryLimit(log, os.DirFS(cgroupRoot), os.Getenv)
}
