// Package chartrender renders deploy/chart with Helm's Go API (what `helm
// template` does, without a cluster: lookup returns nothing) and decodes the
// manifests into unstructured objects.
package chartrender

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ChartDir is deploy/chart, found from this source file.
func ChartDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "chart")
}

// Render renders the chart as release name in namespace with values over
// the chart's defaults and returns the objects in file order.
func Render(name, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	files, err := RenderFiles(name, namespace, values)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, n := range names {
		objs, err := decode(files[n])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

func decode(doc string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(doc), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// RenderFiles renders the chart as Render does and returns every rendered
// file by its path in the chart (claimstream/templates/NOTES.txt, ...).
// Values are checked against values.schema.json first, as helm does.
func RenderFiles(name, namespace string, values map[string]any) (map[string]string, error) {
	ch, err := loader.Load(ChartDir())
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	caps := *chartutil.DefaultCapabilities
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.35.4", Major: "1", Minor: "35"}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}, &caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return files, nil
}
