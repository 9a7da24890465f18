package natsserver_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
)

func TestSecondServerOnOneDataDirFailsAtOnceNamingThePID(t *testing.T) {
	dir := t.TempDir()
	first, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Shutdown()

	start := time.Now()
	second, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
	if err == nil {
		second.Shutdown()
		t.Fatal("a second server started on a data dir that is in use")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusal took %v, want at once", took)
	}
	if !errors.Is(err, natsserver.ErrDataDirInUse) {
		t.Errorf("error %v is not ErrDataDirInUse", err)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	// Once the owner is gone the dir is free again.
	first.Shutdown()
	third, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatalf("after the owner stopped: %v", err)
	}
	third.Shutdown()
}

// A lock file left behind by a dead process holds no flock: it never blocks.
func TestStaleLockFileDoesNotBlockTheStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, natsserver.DataDirLockFile), []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatalf("a stale lock file blocked the start: %v", err)
	}
	defer e.Shutdown()
	b, err := os.ReadFile(filepath.Join(dir, natsserver.DataDirLockFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q, want this pid %d", got, os.Getpid())
	}
}

// The lock holds across processes, and the kernel drops it when its owner
// is killed (no clean release).
func TestDataDirLockHeldByAnotherProcessIsReleasedByItsDeath(t *testing.T) {
	if dir := os.Getenv("CLAIMSTREAM_TEST_HOLD_LOCK"); dir != "" {
		if _, err := natsserver.LockDataDir(dir); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		select {}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDataDirLockHeldByAnotherProcessIsReleasedByItsDeath$")
	cmd.Env = append(os.Environ(), "CLAIMSTREAM_TEST_HOLD_LOCK="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper said %q, %v", line, err)
	}

	_, err = natsserver.LockDataDir(dir)
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("got %v, want the helper's pid %d", err, cmd.Process.Pid)
	}
	kill()
	lock, err := natsserver.LockDataDir(dir)
	if err != nil {
		t.Fatalf("after the owner died: %v", err)
	}
	_ = lock.Release()
}

func TestReadOnlyDataDirIsReportedAtOnce(t *testing.T) {
	dir := eventstest.MountTmpfs(t, "size=1m")
	// Remount read-only, as an operator's volume mounted ro would be.
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_RDONLY, "size=1m"); err != nil {
		t.Skipf("skipped: cannot remount %s read-only here: %v", dir, err)
	}
	start := time.Now()
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
	if err == nil {
		e.Shutdown()
		t.Fatal("started on a read-only data dir")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusal took %v, want at once", took)
	}
	for _, want := range []string{dir, "read-only"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("a refused start left %d entries in the data dir", len(entries))
	}
}

// The probe covers the store subdir (jetstream/) too, and the lock file
// open says read-only as well.
func TestDataDirWriteErrorsSayWhy(t *testing.T) {
	dir := eventstest.MountTmpfs(t, "size=1m")
	store := filepath.Join(dir, "jetstream")
	if err := os.Mkdir(store, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := natsserver.CheckDataDirWritable(dir); err != nil {
		t.Fatalf("a writable dir: %v", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_RDONLY, "size=1m"); err != nil {
		t.Skipf("skipped: cannot remount %s read-only here: %v", dir, err)
	}
	err := natsserver.CheckDataDirWritable(dir)
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("got %v, want read-only", err)
	}
	if _, err := natsserver.LockDataDir(dir); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("lock on a read-only dir: %v", err)
	}
}

func FuzzParseLockPID(f *testing.F) {
	for _, s := range []string{"123\n", "", "  42  ", "-1", "0", "abc", "99999999999999999999", "4194304", "4194305\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pid := natsserver.ParseLockPID(b)
		if pid < 0 || pid > 1<<22 {
			t.Fatalf("ParseLockPID(%q) = %d, out of the pid range", b, pid)
		}
		if pid > 0 && strconv.Itoa(pid) != strings.TrimSpace(string(b)) && strings.TrimLeft(strings.TrimSpace(string(b)), "+0") != strconv.Itoa(pid) {
			t.Fatalf("ParseLockPID(%q) = %d, not what the file says", b, pid)
		}
	})
}

func TestCheckRestoreTarget(t *testing.T) {
	if err := natsserver.CheckRestoreTarget(filepath.Join(t.TempDir(), "new")); err != nil {
		t.Fatalf("a new dir: %v", err)
	}
	if err := natsserver.CheckRestoreTarget(t.TempDir()); err != nil {
		t.Fatalf("an empty dir: %v", err)
	}
	volume := t.TempDir()
	if err := os.Mkdir(filepath.Join(volume, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := natsserver.CheckRestoreTarget(volume); err != nil {
		t.Fatalf("a fresh volume's root: %v", err)
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "stray"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := natsserver.CheckRestoreTarget(full); err == nil {
		t.Fatal("a non-empty dir was accepted")
	}
	srv := eventstest.StartServer(t)
	if err := natsserver.CheckRestoreTarget(srv.Dir); !errors.Is(err, natsserver.ErrDataDirInUse) {
		t.Fatalf("a dir a server owns: %v, want ErrDataDirInUse", err)
	}
}
