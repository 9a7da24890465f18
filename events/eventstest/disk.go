package eventstest

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a tmpfs (options such as "size=4m") on a fresh dir and
// unmounts it when the test ends: a small real file system to fill, or to
// remount read-only. Mounting needs root and a kernel that lets this
// process mount; without them the test is skipped, saying which.
func MountTmpfs(t testing.TB, options string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: mounting a tmpfs needs root, and this test runs as uid", os.Geteuid())
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, options); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs (%s) on %s here: %v", options, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes path until its file system has no byte left.
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("filling %s: %v", path, err)
			}
			break
		}
	}
	// The last chunk may have fit partly: fill the tail in small writes.
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			break
		}
	}
	for {
		if _, err := f.Write(chunk[:1]); err != nil {
			break
		}
	}
}
