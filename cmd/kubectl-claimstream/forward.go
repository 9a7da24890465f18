package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// forwarder opens a local port to a Pod's port and returns its address
// (127.0.0.1:N); the forward lasts until ctx ends.
type forwarder func(ctx context.Context, pod *corev1.Pod, port int32) (string, error)

// spdyForwarder is kubectl port-forward's path: the API server's
// pods/portforward subresource over SPDY.
func spdyForwarder(cfg *restclient.Config, cs kubernetes.Interface) forwarder {
	return func(ctx context.Context, pod *corev1.Pod, port int32) (string, error) {
		tr, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return "", err
		}
		u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
		dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, (*url.URL)(u))
		ready := make(chan struct{})
		errc := make(chan error, 1)
		fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(int(port))}, ctx.Done(), ready, io.Discard, io.Discard)
		if err != nil {
			return "", err
		}
		go func() { errc <- fw.ForwardPorts() }()
		select {
		case <-ready:
		case err := <-errc:
			return "", fmt.Errorf("port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
		case <-ctx.Done():
			return "", ctx.Err()
		}
		ports, err := fw.GetPorts()
		if err != nil || len(ports) == 0 {
			return "", fmt.Errorf("port-forward to pod %s/%s: no local port (%v)", pod.Namespace, pod.Name, err)
		}
		return "127.0.0.1:" + strconv.Itoa(int(ports[0].Local)), nil
	}
}
