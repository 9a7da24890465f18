package kube

import (
	"context"
	"fmt"
	"net/url"
	"time"

	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/flowcontrol"
)

// The API client's rate limit when the config names none: one token bucket
// for every API group, sized for a scale-up of a hundred machines (a Job
// create per machine, then its cordon, labels and Events) to go out in a
// second or two rather than client-go's 5 requests a second.
const (
	DefaultQPS   = 200
	DefaultBurst = 300
)

// CheckRateLimit refuses a rate limit NewClient cannot build (0 stands for
// the default).
func CheckRateLimit(qps float32, burst int) error {
	if qps < 0 {
		return fmt.Errorf("kubernetes client: a QPS of %v: it must be above 0 (default %d)", qps, DefaultQPS)
	}
	if burst < 0 {
		return fmt.Errorf("kubernetes client: a burst of %d: it must be at least 1 (default %d)", burst, DefaultBurst)
	}
	return nil
}

// ObserveRateLimiterLatency sends client-go's wait for its rate limiter,
// every request's, to observe (by verb). client-go keeps one such hook per
// process: only the first call takes effect, later ones are ignored.
func ObserveRateLimiterLatency(observe func(verb string, wait time.Duration)) {
	metrics.Register(metrics.RegisterOpts{RateLimiterLatency: rateLimiterLatency(observe)})
}

type rateLimiterLatency func(verb string, wait time.Duration)

func (f rateLimiterLatency) Observe(_ context.Context, verb string, _ url.URL, wait time.Duration) {
	f(verb, wait)
}

// Client is the part of the Kubernetes API claimstream calls: Nodes, pods,
// ConfigMaps and evictions (core, policy), lifecycle Jobs (batch), the
// built-in scaler's workload (apps), the leader Lease (coordination) and
// Kubernetes Events (events). client-go's whole clientset
// (kubernetes.Interface) satisfies it, so tests may pass its fake; serve
// builds only these six typed clients (NewClient) and its simulated
// cluster only their fakes (NewFake), because the whole clientset, its
// informer factory and its fake link the clients, informers, listers and
// apply configurations of every API group, a large share of the binary's
// code, which the runtime's tables then spread over.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	BatchV1() batchv1client.BatchV1Interface
	AppsV1() appsv1client.AppsV1Interface
	CoordinationV1() coordinationv1client.CoordinationV1Interface
	PolicyV1() policyv1client.PolicyV1Interface
	EventsV1() eventsv1client.EventsV1Interface
}

// clientset is Client over an API server: the six typed clients share one
// HTTP client and one rate limiter, as kubernetes.NewForConfig's do.
type clientset struct {
	core         *corev1client.CoreV1Client
	batch        *batchv1client.BatchV1Client
	apps         *appsv1client.AppsV1Client
	coordination *coordinationv1client.CoordinationV1Client
	policy       *policyv1client.PolicyV1Client
	events       *eventsv1client.EventsV1Client
}

func (c *clientset) CoreV1() corev1client.CoreV1Interface       { return c.core }
func (c *clientset) BatchV1() batchv1client.BatchV1Interface    { return c.batch }
func (c *clientset) AppsV1() appsv1client.AppsV1Interface       { return c.apps }
func (c *clientset) PolicyV1() policyv1client.PolicyV1Interface { return c.policy }
func (c *clientset) EventsV1() eventsv1client.EventsV1Interface { return c.events }
func (c *clientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return c.coordination
}

// NewClient returns the Client of the API server cfg names, set up as
// kubernetes.NewForConfig sets up its clients: the default user agent when
// cfg has none, one transport, and one token bucket of cfg's QPS and Burst
// (DefaultQPS and DefaultBurst when 0) shared by every group when cfg
// brings no rate limiter. Left to each group, a QPS of 0 would give each
// its own bucket of client-go's default 5 a second.
func NewClient(cfg *rest.Config) (Client, error) {
	c := *cfg
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.RateLimiter == nil {
		if c.QPS == 0 {
			c.QPS = DefaultQPS
		}
		if c.Burst == 0 {
			c.Burst = DefaultBurst
		}
		if err := CheckRateLimit(c.QPS, c.Burst); err != nil {
			return nil, err
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	var cs clientset
	for _, build := range []func() error{
		func() (err error) { cs.core, err = corev1client.NewForConfigAndClient(&c, httpClient); return },
		func() (err error) { cs.batch, err = batchv1client.NewForConfigAndClient(&c, httpClient); return },
		func() (err error) { cs.apps, err = appsv1client.NewForConfigAndClient(&c, httpClient); return },
		func() (err error) {
			cs.coordination, err = coordinationv1client.NewForConfigAndClient(&c, httpClient)
			return
		},
		func() (err error) { cs.policy, err = policyv1client.NewForConfigAndClient(&c, httpClient); return },
		func() (err error) { cs.events, err = eventsv1client.NewForConfigAndClient(&c, httpClient); return },
	} {
		if err := build(); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	return &cs, nil
}
