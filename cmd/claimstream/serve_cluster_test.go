package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeRefusesBadClusterFlags(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "route-secret")
	writeFile(t, pw, "s3cret\n")
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "\n")
	three := func(c natsClusterOptions) natsClusterOptions {
		c.replicas = 3
		if c.replicaName == "" {
			c.replicaName = "claimstream-0"
		}
		return c
	}
	routes := []string{"nats-route://127.0.0.1:6222", "127.0.0.1:6223", "127.0.0.1:6224"}
	cases := []struct {
		name string
		c    natsClusterOptions
		want []string
	}{
		{"two replicas", natsClusterOptions{replicas: 2}, []string{"--replicas 2", "1 replica or 3"}},
		{"five replicas", natsClusterOptions{replicas: 5}, []string{"--replicas 5"}},
		{"routes with one replica", natsClusterOptions{replicas: 1, routes: routes}, []string{"--nats-routes needs --replicas 3"}},
		{"three without routes", three(natsClusterOptions{clusterListen: "127.0.0.1:6222"}), []string{"--nats-routes"}},
		{"three without a secret", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: routes}), []string{"--nats-cluster-password-file"}},
		{"an empty secret", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: routes, passwordFile: empty}), []string{"--nats-cluster-password-file", "is empty"}},
		{"a missing secret", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: routes, passwordFile: filepath.Join(dir, "nope")}), []string{"--nats-cluster-password-file", "no such file"}},
		{"off loopback without TLS", three(natsClusterOptions{clusterListen: "0.0.0.0:6222", routes: routes, passwordFile: pw}), []string{"--nats-cluster-listen 0.0.0.0:6222 is not a loopback address", "--nats-cluster-tls-cert"}},
		{"a certificate without a CA", three(natsClusterOptions{clusterListen: "0.0.0.0:6222", routes: routes, passwordFile: pw, clusterTLSCert: pw, clusterTLSKey: pw}), []string{"go together"}},
		{"credentials in a route", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: []string{"nats-route://u:p@127.0.0.1:6223"}, passwordFile: pw}), []string{"--nats-routes", "carries credentials"}},
		{"a route without a port", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: []string{"peer-1"}, passwordFile: pw}), []string{"--nats-routes", "host:port"}},
		{"a bad replica name", three(natsClusterOptions{replicaName: "a b", clusterListen: "127.0.0.1:6222", routes: routes, passwordFile: pw}), []string{"--replica-name"}},
	}
	for _, c := range cases {
		o := natsServeOptions(t, natsOptions{natsClusterOptions: c.c})
		err := runServe(context.Background(), o)
		if err == nil {
			t.Fatalf("%s: serve started", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: error %q does not say %q", c.name, err, w)
			}
		}
		if ents, _ := os.ReadDir(o.dataDir); len(ents) > 0 {
			t.Fatalf("%s: the data dir was written", c.name)
		}
	}
}

// The leader election reads the replica's name from the options.
func TestReplicaNameDefaultsToPodName(t *testing.T) {
	t.Setenv("POD_NAME", "claimstream-2")
	o := serveOptions{}
	newServeFlags := newServe().Flags()
	if f := newServeFlags.Lookup("replica-name"); f == nil || f.DefValue != "claimstream-2" {
		t.Fatalf("--replica-name default %v, want the pod name", f)
	}
	if o.nats.Replicas() != 1 {
		t.Fatalf("replicas of options without flags = %d, want 1", o.nats.Replicas())
	}
}
