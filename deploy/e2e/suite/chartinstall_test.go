package suite

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// installedChart is a chart release created object by object on the real
// API server, and what its StatefulSet's first Pod would run: the
// container's args and environment as the kubelet resolves them, its
// volumes as local directories.
type installedChart struct {
	Objects []*unstructured.Unstructured
	// Args and Env of the claimstream container, $(VAR) expanded, mount
	// paths replaced by the local directories and 0.0.0.0 listeners by
	// free loopback ports.
	Args, Env []string
	// Listen maps a listener flag (--grpc-address) to its loopback address.
	Listen map[string]string
	// Mounts maps a volume name to its local directory.
	Mounts map[string]string
	// ServiceAccount is the Pod's ServiceAccount.
	ServiceAccount string
	PodName        string
	Namespace      string
	// volumes maps a mounted volume's name to its source.
	volumes map[string]corev1.Volume
}

// installChart creates every object of objs on the API server (failing on
// any refusal) and resolves the claimstream container of the StatefulSet
// read back from it, with its volumes materialised under dir.
func installChart(ctx context.Context, objs []*unstructured.Unstructured, dir string) (*installedChart, error) {
	for _, o := range objs {
		if err := applyDynamic(ctx, o, false); err != nil {
			return nil, fmt.Errorf("create %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		onTeardown(func() { _ = deleteDynamic(context.Background(), o) })
	}
	ic := &installedChart{Objects: objs, Listen: map[string]string{}, Mounts: map[string]string{}}
	var sts *appsv1.StatefulSet
	for _, o := range objs {
		if o.GetKind() != "StatefulSet" {
			continue
		}
		got, err := admin.AppsV1().StatefulSets(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read back StatefulSet %s: %w", o.GetName(), err)
		}
		sts = got
	}
	if sts == nil {
		return nil, fmt.Errorf("the chart renders no StatefulSet")
	}
	ns := sts.Namespace
	ic.Namespace = ns
	ic.volumes = map[string]corev1.Volume{}
	ic.PodName = sts.Name + "-0"
	ic.ServiceAccount = sts.Spec.Template.Spec.ServiceAccountName
	var c *corev1.Container
	for i := range sts.Spec.Template.Spec.Containers {
		if sts.Spec.Template.Spec.Containers[i].Name == "claimstream" {
			c = &sts.Spec.Template.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil, fmt.Errorf("StatefulSet %s has no claimstream container", sts.Name)
	}

	// Volumes: ConfigMaps and Secrets as the kubelet projects them, the
	// rest (emptyDir, the data claim) empty.
	vols := map[string]corev1.Volume{}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	mountOf := map[string]string{} // mountPath -> local dir
	for _, m := range c.VolumeMounts {
		local := filepath.Join(dir, "volumes", m.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			return nil, err
		}
		ic.volumes[m.Name] = vols[m.Name]
		ic.Mounts[m.Name] = local
		mountOf[m.MountPath] = local
		if err := ic.Remount(ctx, m.Name); err != nil {
			return nil, err
		}
	}

	// Environment, resolved as the kubelet does for a Pod named PodName
	// in ns that is not (yet) scheduled.
	vars := map[string]string{}
	for _, e := range c.Env {
		val := expandVars(e.Value, vars)
		if vf := e.ValueFrom; vf != nil {
			switch {
			case vf.FieldRef != nil:
				switch vf.FieldRef.FieldPath {
				case "metadata.name":
					val = ic.PodName
				case "metadata.namespace":
					val = ns
				case "spec.nodeName":
					val = ""
				default:
					return nil, fmt.Errorf("env %s: field %s not resolved by this test", e.Name, vf.FieldRef.FieldPath)
				}
			case vf.SecretKeyRef != nil:
				sec, err := admin.CoreV1().Secrets(ns).Get(ctx, vf.SecretKeyRef.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("env %s: %w", e.Name, err)
				}
				val = string(sec.Data[vf.SecretKeyRef.Key])
			case vf.ConfigMapKeyRef != nil:
				cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, vf.ConfigMapKeyRef.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("env %s: %w", e.Name, err)
				}
				val = cm.Data[vf.ConfigMapKeyRef.Key]
			default:
				return nil, fmt.Errorf("env %s: source not resolved by this test", e.Name)
			}
		}
		vars[e.Name] = val
		ic.Env = append(ic.Env, e.Name+"="+val)
	}

	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		a = expandVars(a, vars)
		a = replaceMountPath(a, mountOf)
		if flag, addr, ok := strings.Cut(a, "="); ok && strings.HasPrefix(addr, "0.0.0.0:") {
			ports, err := testenv.FreePorts(1)
			if err != nil {
				return nil, err
			}
			ic.Listen[flag] = fmt.Sprintf("127.0.0.1:%d", ports[0])
			a = flag + "=" + ic.Listen[flag]
		}
		ic.Args = append(ic.Args, a)
	}
	return ic, nil
}

// Remount writes the files of the mounted volume name from its ConfigMap
// or Secret as the API server holds them now, as the kubelet projects them
// into a Pod's volume at start and again after the object changed: each
// file replaced whole (written aside, then renamed), so that a reader never
// sees half of one. Other volumes (emptyDir, the data claim) keep what
// they hold.
func (ic *installedChart) Remount(ctx context.Context, name string) error {
	v, ok := ic.volumes[name]
	if !ok {
		return fmt.Errorf("no volume %s is mounted", name)
	}
	var files map[string][]byte
	switch {
	case v.ConfigMap != nil:
		cm, err := admin.CoreV1().ConfigMaps(ic.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("volume %s: %w", name, err)
		}
		files = map[string][]byte{}
		for k, s := range cm.Data {
			files[k] = []byte(s)
		}
		files = projectItems(files, v.ConfigMap.Items)
	case v.Secret != nil:
		sec, err := admin.CoreV1().Secrets(ic.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("volume %s: %w", name, err)
		}
		files = projectItems(sec.Data, v.Secret.Items)
	}
	local := ic.Mounts[name]
	for k, b := range files {
		tmp := filepath.Join(local, k) + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(local, k)); err != nil {
			return err
		}
	}
	return nil
}

// projectItems keeps the keys items names, under their paths (all keys
// when items is empty), as a ConfigMap or Secret volume does.
func projectItems(data map[string][]byte, items []corev1.KeyToPath) map[string][]byte {
	if len(items) == 0 {
		return data
	}
	out := map[string][]byte{}
	for _, it := range items {
		if b, ok := data[it.Key]; ok {
			out[it.Path] = b
		}
	}
	return out
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandVars expands $(VAR) from vars as the kubelet does; an unknown
// reference stays as written.
func expandVars(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := vars[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// replaceMountPath replaces the longest mount path that a flag's value
// (or a bare argument) is or is under by its local directory, once.
func replaceMountPath(arg string, mounts map[string]string) string {
	flag, val, hasFlag := strings.Cut(arg, "=")
	if !hasFlag {
		val = arg
	}
	best := ""
	for mp := range mounts {
		if (val == mp || strings.HasPrefix(val, mp+"/")) && len(mp) > len(best) {
			best = mp
		}
	}
	if best == "" {
		return arg
	}
	val = mounts[best] + strings.TrimPrefix(val, best)
	if hasFlag {
		return flag + "=" + val
	}
	return val
}

// clientTLS is the TLS configuration of a client of the chart's gRPC
// Service: the chart's client certificate Secret in ns, the server name
// one of the server certificate's names.
func clientTLS(ctx context.Context, ns, secret, serverName string) (*tls.Config, error) {
	sec, err := admin.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("client certificate Secret: %w", err)
	}
	cert, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		return nil, fmt.Errorf("client certificate %s: %w", secret, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		return nil, fmt.Errorf("client certificate Secret %s has no ca.crt", secret)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}
