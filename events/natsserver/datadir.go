package natsserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// DataDirLockFile is the file in the data dir whose flock marks its owner.
// It holds the owner's pid, for the error a second process gets.
const DataDirLockFile = "claimstream.lock"

// ErrDataDirInUse is matched (errors.Is) by a *DataDirInUseError.
var ErrDataDirInUse = errors.New("data dir in use")

// DataDirInUseError says another live process owns the data dir. Two
// servers on one store both acknowledge writes at the same sequence, and a
// restart keeps only one of them: the second owner must never start.
type DataDirInUseError struct {
	Dir string
	// PID is the owner's, read from the lock file; 0 when it had not yet
	// written it.
	PID int
}

func (e *DataDirInUseError) Error() string {
	owner := "another process"
	if e.PID > 0 {
		owner = "another process (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("data dir %s is in use by %s: one claimstream serve owns a data dir; stop it or choose another --data-dir", e.Dir, owner)
}

// Is makes errors.Is(err, ErrDataDirInUse) true.
func (e *DataDirInUseError) Is(target error) bool { return target == ErrDataDirInUse }

// DataDirLock is an exclusive flock on the data dir's lock file, held for
// the life of the owner. The kernel drops it when the process dies, so a
// lock file left by a crash does not block the next start.
type DataDirLock struct {
	f *os.File
}

// LockDataDir takes the data dir for this process, or fails at once with a
// *DataDirInUseError naming the owner's pid.
func LockDataDir(dir string) (*DataDirLock, error) {
	path := filepath.Join(dir, DataDirLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", explainWriteError(dir, err))
	}
	// flock locks belong to the open file, so a second open in this same
	// process conflicts too (two stores in one process are as bad).
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &DataDirInUseError{Dir: dir, PID: readPID(f)}
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data dir: write pid to %s: %w", path, explainWriteError(dir, err))
	}
	return &DataDirLock{f: f}, nil
}

// Release gives the data dir up. The file stays: removing it would let a
// process that opened it before the removal lock an orphan inode while a
// third one locks a new file.
func (l *DataDirLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	return ParseLockPID(buf[:n])
}

// ParseLockPID reads the pid a lock file holds; 0 for anything that is not
// one (an empty file of an owner that has not written it yet, garbage).
func ParseLockPID(b []byte) int {
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || pid > 1<<22 {
		return 0
	}
	return pid
}

// CheckDataDirWritable creates and removes a probe file in dir and in its
// JetStream store (when there is one): a read-only or foreign-owned dir is
// reported at once, naming the path, instead of the embedded server failing
// to enable JetStream and never becoming ready.
func CheckDataDirWritable(dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, "jetstream")} {
		if d != dir {
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
				continue
			}
		}
		probe, err := os.CreateTemp(d, ".claimstream-probe-*")
		if err != nil {
			return explainWriteError(d, err)
		}
		name := probe.Name()
		probe.Close()
		if err := os.Remove(name); err != nil {
			return explainWriteError(d, err)
		}
	}
	return nil
}

// explainWriteError says in an operator's words why dir cannot be written.
func explainWriteError(dir string, err error) error {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("data dir %s is on a read-only file system: remount it read-write or choose another --data-dir: %w", dir, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("data dir %s is not writable by this user (permission denied): fix its owner or mode, or choose another --data-dir: %w", dir, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("data dir %s: no space left on device: %w", dir, err)
	}
	return fmt.Errorf("data dir %s: %w", dir, err)
}

// openDataDir makes sure dir can hold the store and takes it for this
// process.
func openDataDir(dir string) (*DataDirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, explainWriteError(dir, err)
	}
	if err := CheckDataDirWritable(dir); err != nil {
		return nil, err
	}
	return LockDataDir(dir)
}

// CheckRestoreTarget refuses a data dir a restore must not write into:
// one another process owns, or one that holds anything (a restore into a
// store with a log of its own would mix two histories).
func CheckRestoreTarget(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore target: %w", explainWriteError(dir, err))
	}
	var other []string
	for _, e := range entries {
		if e.Name() == "lost+found" && e.IsDir() {
			continue // a fresh ext4 volume's; not a store's
		}
		if e.Name() == DataDirLockFile {
			lock, err := LockDataDir(dir)
			if err != nil {
				return fmt.Errorf("restore target: %w", err)
			}
			_ = lock.Release()
			continue
		}
		other = append(other, e.Name())
	}
	if len(other) > 0 {
		return fmt.Errorf("restore target: data dir %s is not empty (it holds %s): restore only into an empty or new dir", dir, filepath.Join(dir, other[0]))
	}
	return nil
}

// SyncDataDir fsyncs every file and directory under dir. A restore writes
// the store without an fsync per event (which would take a 100,000-event
// restore from seconds to minutes) and makes it durable once, here, after
// the server has stopped and written everything out.
func SyncDataDir(dir string) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", path, err)
		}
		return nil
	})
}
