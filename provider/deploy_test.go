package provider

import (
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The shipped cloud-config holds exactly the keys cluster-autoscaler's
// externalgrpc provider reads (sigs.k8s.io/yaml, json tags), and they parse.
func TestShippedCloudConfig(t *testing.T) {
	b, err := os.ReadFile("../deploy/cluster-autoscaler/cloud-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Address     string          `json:"address"`
		Key         string          `json:"key"`
		Cert        string          `json:"cert"`
		Cacert      string          `json:"cacert"`
		GrpcTimeout metav1.Duration `json:"grpc_timeout"`
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("cloud-config: %v", err)
	}
	if cfg.Address == "" || cfg.Key == "" || cfg.Cert == "" || cfg.Cacert == "" || cfg.GrpcTimeout.Duration < 5*time.Second {
		t.Errorf("cloud-config incomplete: %+v", cfg)
	}
}
