// Package testenv builds, caches, starts and stops a real Kubernetes control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and
// kwok on loopback ports, for the claimstream e2e suite. Only Go is needed:
// the binaries are built from the Go module proxy on first use and cached by
// version.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Versions of the components the harness builds. Override with the
// environment variables CLAIMSTREAM_E2E_{KUBERNETES,ETCD,KWOK}_VERSION.
var (
	KubernetesVersion = envOr("CLAIMSTREAM_E2E_KUBERNETES_VERSION", "v1.35.4")
	EtcdVersion       = envOr("CLAIMSTREAM_E2E_ETCD_VERSION", "v3.6.16")
	KwokVersion       = envOr("CLAIMSTREAM_E2E_KWOK_VERSION", "v0.8.0")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Binaries holds absolute paths of the built components.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler, Kwok string
}

// CacheRoot is where built binaries live: $CLAIMSTREAM_TESTENV_CACHE, else
// $(go env GOCACHE)/../claimstream-testenv, else os.UserCacheDir()/claimstream/testenv.
func CacheRoot() (string, error) {
	if d := os.Getenv("CLAIMSTREAM_TESTENV_CACHE"); d != "" {
		return d, nil
	}
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
		gc := strings.TrimSpace(string(out))
		if gc != "" && gc != "off" {
			return filepath.Join(filepath.Dir(gc), "claimstream-testenv"), nil
		}
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "claimstream", "testenv"), nil
}

// Logf receives build progress lines; tests may set it to t.Logf-like sinks.
var Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testenv: "+format+"\n", args...) }

// EnsureBinaries builds whatever is missing from the cache (at most two
// builds at a time: the machine has two cores) and returns the paths.
func EnsureBinaries(ctx context.Context) (*Binaries, error) {
	root, err := CacheRoot()
	if err != nil {
		return nil, err
	}
	kdir := filepath.Join(root, "kubernetes-"+KubernetesVersion)
	edir := filepath.Join(root, "etcd-"+EtcdVersion)
	wdir := filepath.Join(root, "kwok-"+KwokVersion)
	b := &Binaries{
		Etcd:              filepath.Join(edir, "etcd"),
		APIServer:         filepath.Join(kdir, "kube-apiserver"),
		ControllerManager: filepath.Join(kdir, "kube-controller-manager"),
		Scheduler:         filepath.Join(kdir, "kube-scheduler"),
		Kwok:              filepath.Join(wdir, "kwok"),
	}
	type job struct {
		name string
		dir  string
		want []string
		fn   func(ctx context.Context, dir string) error
	}
	jobs := []job{
		{"kubernetes " + KubernetesVersion, kdir, []string{b.APIServer, b.ControllerManager, b.Scheduler}, buildKubernetes},
		{"etcd " + EtcdVersion, edir, []string{b.Etcd}, buildEtcd},
		{"kwok " + KwokVersion, wdir, []string{b.Kwok}, buildKwok},
	}
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		if allExist(j.want) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			unlock, err := lockDir(ctx, j.dir)
			if err != nil {
				errs[i] = err
				return
			}
			defer unlock()
			if allExist(j.want) { // built by a concurrent process meanwhile
				return
			}
			start := time.Now()
			Logf("building %s into %s (first run only)", j.name, j.dir)
			if err := j.fn(ctx, j.dir); err != nil {
				errs[i] = fmt.Errorf("build %s: %w", j.name, err)
				return
			}
			Logf("built %s in %s", j.name, time.Since(start).Round(time.Second))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return b, nil
}

func allExist(paths []string) bool {
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			return false
		}
	}
	return true
}

// lockDir takes an exclusive lock (a directory created atomically) so two
// test processes do not build the same component at once.
func lockDir(ctx context.Context, dir string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	lock := dir + ".lock"
	for {
		err := os.Mkdir(lock, 0o755)
		if err == nil {
			_ = os.WriteFile(filepath.Join(lock, "pid"), []byte(fmt.Sprint(os.Getpid())), 0o644)
			return func() { _ = os.RemoveAll(lock) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		// Stale lock: its owner is gone.
		if pb, rerr := os.ReadFile(filepath.Join(lock, "pid")); rerr == nil {
			var pid int
			fmt.Sscan(string(pb), &pid)
			if pid > 0 && !processAlive(pid) {
				_ = os.RemoveAll(lock)
				continue
			}
		} else if fi, serr := os.Stat(lock); serr == nil && time.Since(fi.ModTime()) > time.Minute {
			_ = os.RemoveAll(lock)
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// goCmd runs the go tool in dir with a clean module environment.
func goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		tail := out.String()
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail)
	}
	return nil
}

// scratch creates a temporary module directory with the given files.
func scratch(files map[string]string) (string, error) {
	dir, err := os.MkdirTemp("", "claimstream-testenv-build-")
	if err != nil {
		return "", err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// install moves built binaries from a temp dir into dst atomically.
func install(tmpOut, dst string, names ...string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(tmpOut, n), filepath.Join(dst, n)); err != nil {
			return err
		}
	}
	return nil
}

var stagingRe = regexp.MustCompile(`^\s*(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/`)

// kubernetesStaging lists the staging modules k8s.io/kubernetes replaces
// with local paths (31 for v1.35), read from that version's go.mod.
func kubernetesStaging(ctx context.Context, work string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+KubernetesVersion)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download k8s.io/kubernetes: %w", err)
	}
	m := regexp.MustCompile(`"GoMod":\s*"([^"]+)"`).FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("no GoMod in %s", out)
	}
	f, err := os.Open(string(m[1]))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mods []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mm := stagingRe.FindStringSubmatch(sc.Text()); mm != nil {
			mods = append(mods, mm[1])
		}
	}
	if len(mods) == 0 {
		return nil, errors.New("no staging replaces found in k8s.io/kubernetes go.mod")
	}
	return mods, nil
}

func buildKubernetes(ctx context.Context, dst string) error {
	v := KubernetesVersion
	staging := strings.TrimPrefix(v, "v1.")
	stagingV := "v0." + staging // v1.35.4 -> v0.35.4
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	major, minor := parts[0], parts[1]
	var gm strings.Builder
	fmt.Fprintf(&gm, "module claimstream.dev/testenv/kubernetes\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", v)
	work, err := scratch(map[string]string{"go.mod": "module x\n\ngo 1.26\n"})
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	mods, err := kubernetesStaging(ctx, work)
	if err != nil {
		return err
	}
	for _, m := range mods {
		fmt.Fprintf(&gm, "\t%s => %s %s\n", m, m, stagingV)
	}
	gm.WriteString(")\n")
	tools := `//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
`
	dir, err := scratch(map[string]string{"go.mod": gm.String(), "tools.go": tools})
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := goCmd(ctx, dir, "mod", "tidy", "-e"); err != nil {
		return err
	}
	var ld []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ld = append(ld,
			"-X", pkg+".gitVersion="+v,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean",
		)
	}
	ldflags := "-s -w " + strings.Join(ld, " ")
	out := filepath.Join(dir, "bin")
	// One go build invocation for the three commands: they share most packages.
	if err := goCmd(ctx, dir, "build", "-tags", "tools", "-trimpath", "-ldflags", ldflags, "-o", out+"/",
		"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kube-scheduler"); err != nil {
		return err
	}
	return install(out, dst, "kube-apiserver", "kube-controller-manager", "kube-scheduler")
}

func buildEtcd(ctx context.Context, dst string) error {
	main := `package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
`
	gm := fmt.Sprintf("module claimstream.dev/testenv/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n", EtcdVersion)
	dir, err := scratch(map[string]string{"go.mod": gm, "main.go": main})
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := goCmd(ctx, dir, "mod", "tidy"); err != nil {
		return err
	}
	out := filepath.Join(dir, "bin")
	if err := goCmd(ctx, dir, "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(out, "etcd"), "."); err != nil {
		return err
	}
	return install(out, dst, "etcd")
}

func buildKwok(ctx context.Context, dst string) error {
	gm := fmt.Sprintf("module claimstream.dev/testenv/kwok\n\ngo 1.26\n\nrequire sigs.k8s.io/kwok %s\n", KwokVersion)
	tools := "//go:build tools\n\npackage tools\n\nimport _ \"sigs.k8s.io/kwok/cmd/kwok\"\n"
	dir, err := scratch(map[string]string{"go.mod": gm, "tools.go": tools})
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := goCmd(ctx, dir, "mod", "tidy", "-e"); err != nil {
		return err
	}
	out := filepath.Join(dir, "bin")
	ld := "-s -w"
	if err := goCmd(ctx, dir, "build", "-tags", "tools", "-trimpath", "-ldflags", ld, "-o", filepath.Join(out, "kwok"), "sigs.k8s.io/kwok/cmd/kwok"); err != nil {
		return err
	}
	return install(out, dst, "kwok")
}

// KwokStages returns kwok v0.8.0's "fast" node and pod stages, concatenated,
// read from the module cache (the module is downloaded if needed); the
// pod-complete stage leaves the pods of power drivers' Jobs alone.
func KwokStages(ctx context.Context) (string, error) {
	dir, err := kwokModuleDir(ctx)
	if err != nil {
		return "", err
	}
	base := filepath.Join(dir, "kustomize", "stage")
	var b strings.Builder
	for _, f := range []string{
		"node/fast/node-initialize.yaml",
		"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml",
		"pod/fast/pod-complete.yaml",
		"pod/fast/pod-delete.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(base, f))
		if err != nil {
			return "", err
		}
		if f == "pod/fast/pod-complete.yaml" {
			if data, err = skipPowerPods(data); err != nil {
				return "", fmt.Errorf("%s: %w", f, err)
			}
		}
		b.WriteString("---\n")
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String(), nil
}

// LabelPowerDriver marks the Job and pod of a power driver
// (handlers.LabelPowerDriver).
const LabelPowerDriver = "claimstream.dev/power-driver"

// skipPowerPods keeps a pod stage off the pods of power drivers' Jobs:
// their container runs as a process of the test environment
// (machines.PowerJobs), which ends the pod as the kubelet would.
func skipPowerPods(stage []byte) ([]byte, error) {
	const anchor = "    matchExpressions:\n"
	if !bytes.Contains(stage, []byte(anchor)) {
		return nil, fmt.Errorf("no %q in the stage", strings.TrimSpace(anchor))
	}
	expr := anchor + "    - key: '.metadata.labels[\"" + LabelPowerDriver + "\"]'\n      operator: 'DoesNotExist'\n"
	return bytes.Replace(stage, []byte(anchor), []byte(expr), 1), nil
}

// KwokPortForwardCRD returns kwok's PortForward CustomResourceDefinition
// manifest (YAML), read from the module cache.
func KwokPortForwardCRD(ctx context.Context) ([]byte, error) {
	dir, err := kwokModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, "kustomize", "crd", "bases", "kwok.x-k8s.io_portforwards.yaml"))
}

// kwokModuleDir returns kwok's module directory in the module cache,
// downloading the module if needed.
func kwokModuleDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+KwokVersion)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download kwok: %w", err)
	}
	m := regexp.MustCompile(`"Dir":\s*"([^"]+)"`).FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("no Dir in %s", out)
	}
	return string(m[1]), nil
}
