// Package browsertest runs a real headless Chromium for the dashboard's
// tests (chromedp over the DevTools protocol) and keeps their screenshots.
//
// Without Chromium a test skips, saying so loudly, so the suite still runs
// on a machine with only Go; with CLAIMSTREAM_REQUIRE_BROWSER=1 (CI) it
// fails instead.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Env names.
const (
	// RequireEnv=1 makes a missing browser a failure.
	RequireEnv = "CLAIMSTREAM_REQUIRE_BROWSER"
	// ChromiumEnv names the browser binary (default: chromium on PATH).
	ChromiumEnv = "CLAIMSTREAM_CHROMIUM"
	// ArtifactsEnv is where screenshots go (default: the test's temp dir).
	ArtifactsEnv = "CLAIMSTREAM_BROWSER_ARTIFACTS"
)

// Chromium finds the browser binary.
func Chromium() (string, error) {
	if p := os.Getenv(ChromiumEnv); p != "" {
		return exec.LookPath(p)
	}
	var errs []error
	for _, name := range []string{"chromium", "chromium-browser"} {
		p, err := exec.LookPath(name)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no Chromium: %v", errs)
}

// Start launches headless Chromium with a fresh profile for t and returns
// a browser tab's context; the browser is killed when t ends. A missing
// browser skips t (or fails it under CLAIMSTREAM_REQUIRE_BROWSER=1).
func Start(t testing.TB, width, height int) context.Context {
	t.Helper()
	path, err := Chromium()
	if err != nil {
		msg := fmt.Sprintf("\n*** %s: SKIPPING the browser test: %v\n*** install Debian's chromium (apt-get install -y chromium), or set %s=1 to make this a failure ***", t.Name(), err, RequireEnv)
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(width, height),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // kills the browser and its children
	})
	// Start the browser now, so a failure to start shows here. (The first
	// run's context lives as long as the browser: no time-out on it.)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// ArtifactDir is where t's screenshots go: $CLAIMSTREAM_BROWSER_ARTIFACTS
// (created), else a temp dir of t.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(ArtifactsEnv)
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("%s: %v", ArtifactsEnv, err)
	}
	return dir
}

// Screenshot saves the tab's viewport as dir/name.png.
func Screenshot(t testing.TB, ctx context.Context, dir, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
	return path
}

// WaitJS polls expr (a JavaScript expression) in the tab until it is true,
// every 50 ms for at most d; on time-out it fails t with what expr last
// gave and why.
func WaitJS(t testing.TB, ctx context.Context, d time.Duration, what, expr string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var last error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		last = err
		select {
		case <-tick.C:
		case <-deadline.C:
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.location.href + "\n" + document.body.innerText.slice(0, 2000)`))
			t.Fatalf("%s: not after %s (last error %v); the page:\n%s", what, d, last, html)
		}
	}
}
