// Command kubectl-claimstream is the claimstream CLI as a kubectl plugin:
// `kubectl claimstream get groups -n NAMESPACE`. It reads the kubeconfig,
// finds the chart's API Service, its token and (with TLS) its CA in the
// namespace, and port-forwards to a ready serve Pod when the Service is not
// reachable from where it runs. The verbs are claimstream's (internal/cli).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/claimstream/claimstream/internal/buildinfo"
	"github.com/claimstream/claimstream/internal/cli"
	"github.com/claimstream/claimstream/provider/rest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot(&plugin{}).ExecuteContext(ctx)
	stop()
	if err != nil {
		// As kubectl prints its errors.
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// plugin is the kubectl side: the kubeconfig flags and how the API is
// reached.
type plugin struct {
	kubeconfig, context, namespace, release, portForward string

	// clients gives the Kubernetes clients, the forwarder and the
	// namespace the kubeconfig and flags name; tests give fakes.
	clients func() (kubernetes.Interface, forwarder, string, error)
	// dialTimeout bounds the check that the Service answers.
	dialTimeout time.Duration

	ctx  context.Context
	conn *rest.Client
}

func newRoot(p *plugin) *cobra.Command {
	root := &cobra.Command{
		Use: "kubectl-claimstream",
		// kubectl runs it as `kubectl claimstream`: usage and help say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl claimstream"},
		Short:       "The claimstream CLI as a kubectl plugin: it finds the API, its token and CA in the namespace",
		Long: `kubectl claimstream runs claimstream's verbs (get, describe, events, audit,
replay, claim, delete, decommission, recommission, cost, sinks, what-if)
against the claimstream the chart installed in the namespace: it finds the
API Service by the chart's labels, reads the API token from its Secret (and
the CA from the TLS Secret when the API serves TLS), and, when the Service
is not reachable from here, port-forwards to a ready serve Pod by itself.
--server and --token still name an API by hand.`,
		Example: "  kubectl claimstream get groups -n claimstream\n  kubectl claimstream get claims -n claimstream -o wide --context prod\n" +
			"  kubectl claimstream describe slot node-1 -n claimstream\n  kubectl claimstream events -n claimstream --follow",
		Version:       buildinfo.Get().Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch p.portForward {
			case "auto", "always", "never":
			default:
				return fmt.Errorf("--port-forward %s: want auto, always or never", p.portForward)
			}
			p.ctx = cmd.Context()
			return nil
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&p.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&p.context, "context", "", "the kubeconfig context to use")
	f.StringVarP(&p.namespace, "namespace", "n", "", "the namespace of the claimstream release (default: the context's namespace)")
	f.StringVar(&p.release, "release", "", "the Helm release, when the namespace has more than one")
	f.StringVar(&p.portForward, "port-forward", "auto", "reach the API through a port-forward to a serve Pod: auto (when the Service is not reachable from here), always or never")
	root.AddCommand(cli.Commands()...)
	if p.clients == nil {
		p.clients = p.kubeClients
	}
	if p.dialTimeout == 0 {
		p.dialTimeout = 2 * time.Second
	}
	cli.Discover = p.connect
	return root
}

// kubeClients reads the kubeconfig as kubectl does: --kubeconfig, then
// $KUBECONFIG, then ~/.kube/config; --context and -n over the context's.
func (p *plugin) kubeClients() (kubernetes.Interface, forwarder, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = p.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: p.context}
	overrides.Context.Namespace = p.namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("the kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, nil, "", fmt.Errorf("the kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	return cs, spdyForwarder(cfg, cs), ns, nil
}

// connect finds the API, once per run (completion and the verbs may ask
// again): the Service when it is reachable, else a port-forward.
func (p *plugin) connect() (*rest.Client, error) {
	if p.conn != nil {
		return p.conn, nil
	}
	ctx := p.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	cs, fw, ns, err := p.clients()
	if err != nil {
		return nil, err
	}
	t, err := discover(ctx, cs, ns, p.release)
	if err != nil {
		return nil, err
	}
	addr := t.serviceAddr()
	forward := p.portForward == "always" || (p.portForward == "auto" && !t.answers(ctx, addr, p.dialTimeout))
	if forward {
		if t.pod == nil {
			return nil, fmt.Errorf("Service %s in namespace %s is not reachable from here (%s) and no ready serve Pod behind it to port-forward to (kubectl get pods -n %s -l %s)",
				t.service.Name, ns, addr, ns, selectorOf(t))
		}
		if addr, err = fw(ctx, t.pod, t.podPort); err != nil {
			return nil, err
		}
	}
	c, err := t.client(addr)
	if err != nil {
		return nil, err
	}
	p.conn = c
	return c, nil
}

func selectorOf(t *target) string {
	if len(t.service.Spec.Selector) == 0 {
		return chartLabel
	}
	return labels.SelectorFromSet(t.service.Spec.Selector).String()
}
