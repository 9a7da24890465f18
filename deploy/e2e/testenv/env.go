package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/internal/freeport"
)

// Options of Start.
type Options struct {
	// Dir holds the data, the logs and the kubeconfig. Empty: a new temp dir,
	// removed by Stop unless KeepDir.
	Dir     string
	KeepDir bool
	// Log receives progress lines (default: Logf).
	Log func(format string, args ...any)
	// ExtraAPIServerArgs, ExtraControllerManagerArgs are appended to the
	// command lines.
	ExtraAPIServerArgs         []string
	ExtraControllerManagerArgs []string
}

// Env is one running control plane. Every process listens on 127.0.0.1 only.
type Env struct {
	Dir        string
	Host       string // https://127.0.0.1:<port>
	Kubeconfig string // admin (system:masters) kubeconfig
	CAPEM      []byte
	AdminToken string
	Binaries   *Binaries

	opts  Options
	log   func(string, ...any)
	mu    sync.Mutex
	procs []*Process
	once  sync.Once
}

// Start builds (or finds) the binaries and starts etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, each in its own process
// group, on loopback ports chosen now. On error everything started is stopped.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	log := opts.Log
	if log == nil {
		log = Logf
	}
	bins, err := EnsureBinaries(ctx)
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "claimstream-e2e-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, Binaries: bins, opts: opts, log: log}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	p, err := newPKI()
	if err != nil {
		return nil, err
	}
	e.CAPEM = p.caPEM
	e.AdminToken = randomToken()
	pk := func(n string) string { return filepath.Join(dir, "pki", n) }
	if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
		return nil, err
	}
	if err := writeFiles(map[string][]byte{
		pk("ca.crt"):        p.caPEM,
		pk("apiserver.crt"): p.servingCertPEM,
		pk("apiserver.key"): p.servingKeyPEM,
		pk("sa.key"):        p.saKeyPEM,
		pk("sa.pub"):        p.saPubPEM,
		pk("tokens.csv"):    []byte(fmt.Sprintf("%s,e2e-admin,e2e-admin,\"system:masters\"\n", e.AdminToken)),
	}); err != nil {
		return nil, err
	}

	ports, err := FreePorts(6)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort, kubeletPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]

	// etcd
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	if _, err := e.start(ctx, "etcd", bins.Etcd,
		"--name=e2e",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, etcdURL+"/health", nil, func(b string) bool { return strings.Contains(b, `"health":"true"`) }, time.Minute); err != nil {
		return nil, fmt.Errorf("etcd not healthy: %w%s", err, e.tail("etcd"))
	}

	// kube-apiserver
	e.Host = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	apiArgs := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--etcd-servers=" + etcdURL,
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + pk("apiserver.crt"),
		"--tls-private-key-file=" + pk("apiserver.key"),
		"--client-ca-file=" + pk("ca.crt"),
		"--token-auth-file=" + pk("tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pk("sa.pub"),
		"--service-account-signing-key-file=" + pk("sa.key"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--storage-backend=etcd3",
		"--profiling=false",
		// kwok serves the kubelet API of every fake node on 127.0.0.1 (the
		// node's InternalIP) with the serving certificate of this CA.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority=" + pk("ca.crt"),
	}
	apiArgs = append(apiArgs, opts.ExtraAPIServerArgs...)
	if _, err := e.start(ctx, "kube-apiserver", bins.APIServer, apiArgs...); err != nil {
		return nil, err
	}
	tlsCfg, err := e.tlsConfig()
	if err != nil {
		return nil, err
	}
	hdr := map[string]string{"Authorization": "Bearer " + e.AdminToken}
	if err := waitHTTPS(ctx, e.Host+"/readyz", tlsCfg, hdr, func(b string) bool { return b == "ok" }, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("kube-apiserver not ready: %w%s", err, e.tail("kube-apiserver"))
	}
	e.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, []byte(KubeconfigToken(e.Host, e.CAPEM, "e2e-admin", e.AdminToken)), 0o600); err != nil {
		return nil, err
	}

	// kube-controller-manager
	kcmArgs := []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--authentication-kubeconfig=" + e.Kubeconfig,
		"--authorization-kubeconfig=" + e.Kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", kcmPort),
		"--cert-dir=" + filepath.Join(dir, "kcm-certs"),
		"--leader-elect=false",
		"--service-account-private-key-file=" + pk("sa.key"),
		"--root-ca-file=" + pk("ca.crt"),
		"--use-service-account-credentials=false",
		"--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle,-route,-persistentvolume-binder,-attachdetach,-persistentvolume-expander,-ephemeral-volume,-pvc-protection,-pv-protection",
		"--concurrent-job-syncs=10",
		"--profiling=false",
	}
	kcmArgs = append(kcmArgs, opts.ExtraControllerManagerArgs...)
	if _, err := e.start(ctx, "kube-controller-manager", bins.ControllerManager, kcmArgs...); err != nil {
		return nil, err
	}
	// kube-scheduler
	if _, err := e.start(ctx, "kube-scheduler", bins.Scheduler,
		"--kubeconfig="+e.Kubeconfig,
		"--authentication-kubeconfig="+e.Kubeconfig,
		"--authorization-kubeconfig="+e.Kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", schedPort),
		"--cert-dir="+filepath.Join(dir, "scheduler-certs"),
		"--leader-elect=false",
		"--profiling=false",
	); err != nil {
		return nil, err
	}
	// kwok, with its PortForward CRD installed first: kwok lists it at start.
	if err := e.installKwokCRD(ctx, tlsCfg, hdr); err != nil {
		return nil, err
	}
	stages, err := KwokStages(ctx)
	if err != nil {
		return nil, err
	}
	kwokCfg := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(kwokCfg, []byte(stages), 0o644); err != nil {
		return nil, err
	}
	if _, err := e.start(ctx, "kwok", bins.Kwok,
		"--kubeconfig="+e.Kubeconfig,
		"--config="+kwokCfg,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		// The fake nodes' kubelet API (port-forward to a Pod, as a
		// PortForward object says), on the port the nodes report.
		fmt.Sprintf("--server-address=127.0.0.1:%d", kubeletPort),
		"--node-ip=127.0.0.1",
		fmt.Sprintf("--node-port=%d", kubeletPort),
		"--tls-cert-file="+pk("apiserver.crt"),
		"--tls-private-key-file="+pk("apiserver.key"),
		"--enable-crds=PortForward",
		"--node-lease-duration-seconds=40",
	); err != nil {
		return nil, err
	}
	kh := fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort)
	if err := waitHTTPS(ctx, kh, &tls.Config{InsecureSkipVerify: true}, nil, func(b string) bool { return b == "ok" }, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("kube-controller-manager not healthy: %w%s", err, e.tail("kube-controller-manager"))
	}
	sh := fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort)
	if err := waitHTTPS(ctx, sh, &tls.Config{InsecureSkipVerify: true}, nil, func(b string) bool { return b == "ok" }, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("kube-scheduler not healthy: %w%s", err, e.tail("kube-scheduler"))
	}
	log("control plane up at %s (dir %s)", e.Host, dir)
	return e, nil
}

// installKwokCRD creates kwok's PortForward CRD and waits until it is served.
func (e *Env) installKwokCRD(ctx context.Context, tlsCfg *tls.Config, hdr map[string]string) error {
	manifest, err := KwokPortForwardCRD(ctx)
	if err != nil {
		return err
	}
	body, err := yaml.YAMLToJSON(manifest)
	if err != nil {
		return fmt.Errorf("kwok PortForward CRD: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Host+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("create kwok PortForward CRD: %w", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("create kwok PortForward CRD: %s: %s", resp.Status, b)
	}
	list := e.Host + "/apis/kwok.x-k8s.io/v1alpha1/portforwards"
	return waitHTTPS(ctx, list, tlsCfg, hdr, func(b string) bool { return strings.Contains(b, `"kind":"PortForwardList"`) }, time.Minute)
}

func (e *Env) tlsConfig() (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(e.CAPEM) {
		return nil, errors.New("bad CA")
	}
	return &tls.Config{RootCAs: pool}, nil
}

// start runs one component with its output in <dir>/logs/<name>.log.
func (e *Env) start(ctx context.Context, name, bin string, args ...string) (*Process, error) {
	p, err := StartProcess(name, bin, args, filepath.Join(e.Dir, "logs"), nil)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	e.log("started %s (pid %d)", name, p.Pid())
	return p, nil
}

// tail returns the end of a component's log, for error messages.
func (e *Env) tail(name string) string {
	return "\n--- " + name + " log tail ---\n" + TailFile(filepath.Join(e.Dir, "logs", name+".log"), 3000)
}

// Keep keeps the environment's directory (logs, data, kubeconfigs) at Stop.
func (e *Env) Keep() {
	e.mu.Lock()
	e.opts.KeepDir = true
	e.mu.Unlock()
}

// Processes lists the running components.
func (e *Env) Processes() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Process(nil), e.procs...)
}

// Stop stops every component by process group, in reverse start order, and
// waits for each to exit. Safe to call more than once and concurrently.
func (e *Env) Stop() {
	e.once.Do(func() {
		e.mu.Lock()
		procs := append([]*Process(nil), e.procs...)
		e.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop(10 * time.Second)
		}
		e.mu.Lock()
		keep := e.opts.KeepDir
		e.mu.Unlock()
		if e.opts.Dir == "" && !keep && os.Getenv("CLAIMSTREAM_E2E_KEEP") == "" {
			_ = os.RemoveAll(e.Dir)
		} else {
			e.log("kept %s (logs/, kubeconfigs, data)", e.Dir)
		}
	})
}

// TailFile returns the last n bytes of a file.
func TailFile(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(fi.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1, below the
// kernel's ephemeral range (so no outgoing connection takes one before the
// process it is meant for binds it).
func FreePorts(n int) ([]int, error) { return freeport.Ports(n) }

func waitHTTP(ctx context.Context, url string, hdr map[string]string, ok func(string) bool, timeout time.Duration) error {
	return waitHTTPS(ctx, url, nil, hdr, ok, timeout)
}

func waitHTTPS(ctx context.Context, url string, tlsCfg *tls.Config, hdr map[string]string, ok func(string) bool, timeout time.Duration) error {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: nil}}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ok(strings.TrimSpace(string(b))) {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, b)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %s)", url, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
