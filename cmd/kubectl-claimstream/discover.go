package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/claimstream/claimstream/provider/rest"
)

// What the chart (deploy/chart) names and labels: the REST API's Service
// is <fullname>-http with a port named http, labelled with the chart's
// name and the release; the token is the key `token` of <fullname>-api-token
// (or rest.existingTokenSecret, which the serve Pod's CLAIMSTREAM_API_TOKEN
// names); with rest.tls the Pod serves the API with --api-tls-cert from
// the server certificate's Secret, whose ca.crt the plugin trusts.
const (
	chartLabel     = "app.kubernetes.io/name=claimstream"
	instanceLabel  = "app.kubernetes.io/instance"
	httpPort       = "http"
	tokenEnv       = "CLAIMSTREAM_API_TOKEN"
	tokenKey       = "token"
	caKey          = "ca.crt"
	tlsCertFlag    = "--api-tls-cert="
	tokenSecretSfx = "-api-token"
	serviceSfx     = "-http"
)

// target is the claimstream API found in a namespace.
type target struct {
	namespace string
	service   *corev1.Service
	port      int32
	// pod is a ready serve Pod behind the Service, nil when none is (or
	// Pods cannot be listed): port-forwarding needs one.
	pod *corev1.Pod
	// podPort is the API's port in the Pod.
	podPort int32
	// token came from key tokenKey of Secret tokenSecret.
	token, tokenSecret, tokenKey string
	// caPEM is set when the API is served over TLS.
	caPEM []byte
}

// scheme is the API's scheme.
func (t *target) scheme() string {
	if t.caPEM != nil {
		return "https"
	}
	return "http"
}

// host is the Service's DNS name: the name the server certificate has.
func (t *target) host() string {
	return t.service.Name + "." + t.namespace + ".svc"
}

// discover finds the chart's API Service in ns (of release, when given),
// a ready Pod behind it, the token and, with TLS, the CA.
func discover(ctx context.Context, cs kubernetes.Interface, ns, release string) (*target, error) {
	sel := chartLabel
	if release != "" {
		sel += "," + instanceLabel + "=" + release
	}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, kubeErr(err, "list Services", ns)
	}
	var found []corev1.Service
	for _, s := range svcs.Items {
		if apiPort(s) != nil {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no claimstream Service in namespace %s; is the chart installed? (looked for label %s and a port named %s; -n NAMESPACE names another namespace)", ns, sel, httpPort)
	case 1:
	default:
		var rels []string
		for _, s := range found {
			rels = append(rels, s.Labels[instanceLabel]+" (Service "+s.Name+")")
		}
		slices.Sort(rels)
		return nil, fmt.Errorf("%d claimstream releases in namespace %s: %s; pick one with --release NAME", len(found), ns, strings.Join(rels, ", "))
	}
	t := &target{namespace: ns, service: &found[0], port: apiPort(found[0]).Port}
	if err := t.findPod(ctx, cs); err != nil {
		return nil, err
	}
	secret, key := t.tokenRef()
	s, err := cs.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return nil, kubeErr(err, "get Secret "+secret+" (the API token)", ns)
	}
	tok := strings.TrimSpace(string(s.Data[key]))
	if tok == "" {
		return nil, fmt.Errorf("Secret %s in namespace %s has no key %q: the API token is missing", secret, ns, key)
	}
	t.token, t.tokenSecret, t.tokenKey = tok, secret, key
	if caSecret := t.tlsSecret(); caSecret != "" {
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, caSecret, metav1.GetOptions{})
		if err != nil {
			return nil, kubeErr(err, "get Secret "+caSecret+" (the API's TLS CA)", ns)
		}
		if len(s.Data[caKey]) == 0 {
			return nil, fmt.Errorf("Secret %s in namespace %s has no %s: the API serves TLS but its CA is not there (use --server and --ca-file)", caSecret, ns, caKey)
		}
		t.caPEM = s.Data[caKey]
	}
	return t, nil
}

func apiPort(s corev1.Service) *corev1.ServicePort {
	for i, p := range s.Spec.Ports {
		if p.Name == httpPort {
			return &s.Spec.Ports[i]
		}
	}
	return nil
}

// findPod picks a ready Pod the Service selects (the leader's with three
// replicas). Pods that cannot be listed leave it nil: the Service may
// still be reachable.
func (t *target) findPod(ctx context.Context, cs kubernetes.Interface) error {
	if len(t.service.Spec.Selector) == 0 {
		return nil
	}
	pods, err := cs.CoreV1().Pods(t.namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(t.service.Spec.Selector).String()})
	if apierrors.IsForbidden(err) {
		return nil
	}
	if err != nil {
		return kubeErr(err, "list Pods", t.namespace)
	}
	items := pods.Items
	slices.SortFunc(items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range items {
		p := &items[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
			t.pod = p
			t.podPort = containerPort(p, t.service)
			return nil
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerPort is the Pod's port the Service's http port targets.
func containerPort(p *corev1.Pod, s *corev1.Service) int32 {
	sp := apiPort(*s)
	if sp.TargetPort.IntVal != 0 {
		return sp.TargetPort.IntVal
	}
	name := sp.TargetPort.StrVal
	if name == "" {
		return sp.Port
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == name {
				return cp.ContainerPort
			}
		}
	}
	return sp.Port
}

// tokenRef is the token's Secret and key: what the serve Pod's
// CLAIMSTREAM_API_TOKEN takes, or the chart's default name.
func (t *target) tokenRef() (string, string) {
	if t.pod != nil {
		for _, c := range t.pod.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == tokenEnv && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					return e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key
				}
			}
		}
	}
	return strings.TrimSuffix(t.service.Name, serviceSfx) + tokenSecretSfx, tokenKey
}

// tlsSecret is the Secret of the API's certificate when the serve Pod
// serves the API over TLS (--api-tls-cert from a Secret volume), or "".
func (t *target) tlsSecret() string {
	if t.pod == nil {
		return ""
	}
	for _, c := range t.pod.Spec.Containers {
		for _, a := range c.Args {
			cert, ok := strings.CutPrefix(a, tlsCertFlag)
			if !ok {
				continue
			}
			dir := path.Dir(cert)
			for _, m := range c.VolumeMounts {
				if path.Clean(m.MountPath) != dir {
					continue
				}
				for _, v := range t.pod.Spec.Volumes {
					if v.Name == m.Name && v.Secret != nil {
						return v.Secret.SecretName
					}
				}
			}
		}
	}
	return ""
}

// kubeErr says what was refused: RBAC's refusal names the verb and the
// namespace, as kubectl's.
func kubeErr(err error, what, ns string) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("cannot %s in namespace %s: forbidden by RBAC (the plugin reads the claimstream Service, its serve Pods and the API token Secret; ask for get/list on services, pods and secrets there): %w", what, ns, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("cannot %s in namespace %s: not found; is the chart installed whole? %w", what, ns, err)
	}
	return fmt.Errorf("cannot %s in namespace %s: %w", what, ns, err)
}

// httpClient is the API's HTTP client: it trusts the CA and checks the
// Service's name, whichever address it dials (a forwarded local port too).
func (t *target) httpClient() (*http.Client, error) {
	if t.caPEM == nil {
		return nil, nil
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(t.caPEM) {
		return nil, errors.New("the API's CA (" + caKey + ") holds no PEM certificate")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: t.host()}
	return &http.Client{Transport: tr}, nil
}

// serviceAddr is where the Service answers from inside the cluster: its
// cluster IP, or its DNS name.
func (t *target) serviceAddr() string {
	host := t.host()
	if ip := t.service.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		host = ip
	}
	return net.JoinHostPort(host, strconv.Itoa(int(t.port)))
}

// answers tells whether claimstream's API answers at addr within the
// timeout: its /healthz, not merely a connection (a proxy on the way may
// take any connection), since a kubectl outside the cluster cannot reach a
// ClusterIP.
func (t *target) answers(ctx context.Context, addr string, timeout time.Duration) bool {
	hc, err := t.httpClient()
	if err != nil {
		return false
	}
	if hc == nil {
		hc = &http.Client{}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.scheme()+"://"+addr+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h rest.Health
	return resp.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h) == nil && h.Status == "ok"
}

// client is the REST client of the API at addr (host:port).
func (t *target) client(addr string) (*rest.Client, error) {
	hc, err := t.httpClient()
	if err != nil {
		return nil, err
	}
	return &rest.Client{
		BaseURL:  t.scheme() + "://" + addr,
		Token:    t.token,
		HTTP:     hc,
		AuthHint: fmt.Sprintf("  the token came from key %q of Secret %s in namespace %s; --token TOKEN overrides it", t.tokenKey, t.tokenSecret, t.namespace),
	}, nil
}
