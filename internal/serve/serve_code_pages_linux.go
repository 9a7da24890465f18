package serve

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dropExecutableCodePages unmaps the resident pages of the executable's
// read-only mappings (MADV_DONTNEED: a private mapping's untouched page
// comes back from the file on its next use) and returns the mappings as
// they were.
func dropExecutableCodePages() ([]codeMapping, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("the executable's path: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("the process's mappings: %w", err)
	}
	mappings, err := executableCodeMappings(smaps, exe)
	if err != nil {
		return nil, err
	}
	for i, m := range mappings {
		// The address is the kernel's, not a Go pointer: Syscall, not
		// unix.Madvise, which takes a slice.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED); errno != 0 {
			return mappings[:i], fmt.Errorf("unmapping %x-%x: %w", m.start, m.end, errno)
		}
	}
	return mappings, nil
}
