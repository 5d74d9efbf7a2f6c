package deploy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// manifests is one kustomization rendered and decoded into typed objects.
type manifests struct {
	dir             string
	namespaces      []*corev1.Namespace
	statefulSets    []*appsv1.StatefulSet
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	budgets         []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
	rules           []*monitoringv1.PrometheusRule
	objects         []metav1.Object // every object above, in rendering order
}

// newStrictDecoder decodes YAML or JSON manifests of the kinds the deployment may contain,
// failing on unknown kinds and on unknown or duplicated fields.
func newStrictDecoder() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer(), nil
}

// render builds the kustomization in dir in-process, as `kustomize build dir` does, and decodes
// every object strictly.
func render(dir string) (*manifests, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	decoder, err := newStrictDecoder()
	if err != nil {
		return nil, err
	}
	m := &manifests{dir: dir}
	for _, r := range resources.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("%s: encode %s: %w", dir, r.CurId(), err)
		}
		obj, _, err := decoder.Decode(data, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: decode %s: %w", dir, r.CurId(), err)
		}
		if err := m.add(obj); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	return m, nil
}

func (m *manifests) add(obj runtime.Object) error {
	switch o := obj.(type) {
	case *corev1.Namespace:
		m.namespaces = append(m.namespaces, o)
	case *appsv1.StatefulSet:
		m.statefulSets = append(m.statefulSets, o)
	case *corev1.Service:
		m.services = append(m.services, o)
	case *corev1.ConfigMap:
		m.configMaps = append(m.configMaps, o)
	case *policyv1.PodDisruptionBudget:
		m.budgets = append(m.budgets, o)
	case *monitoringv1.ServiceMonitor:
		m.serviceMonitors = append(m.serviceMonitors, o)
	case *monitoringv1.PrometheusRule:
		m.rules = append(m.rules, o)
	default:
		return fmt.Errorf("unexpected object %T", obj)
	}
	m.objects = append(m.objects, obj.(metav1.Object))
	return nil
}

// statefulSet returns the only StatefulSet.
func (m *manifests) statefulSet() (*appsv1.StatefulSet, error) {
	if len(m.statefulSets) != 1 {
		return nil, fmt.Errorf("%s renders %d StatefulSets, want 1", m.dir, len(m.statefulSets))
	}
	return m.statefulSets[0], nil
}

func (m *manifests) configMap(name string) (*corev1.ConfigMap, error) {
	for _, cm := range m.configMaps {
		if cm.Name == name {
			return cm, nil
		}
	}
	return nil, fmt.Errorf("%s renders no ConfigMap %q", m.dir, name)
}

func (m *manifests) service(name string) (*corev1.Service, error) {
	for _, s := range m.services {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s renders no Service %q", m.dir, name)
}

// coordinatordContainer returns the container named coordinatord of sts.
func coordinatordContainer(sts *appsv1.StatefulSet) (*corev1.Container, error) {
	for i := range sts.Spec.Template.Spec.Containers {
		if c := &sts.Spec.Template.Spec.Containers[i]; c.Name == "coordinatord" {
			return c, nil
		}
	}
	return nil, errors.New("StatefulSet " + sts.Name + " has no container named coordinatord")
}

// commandLine holds the flags of a coordinatord command line.
type commandLine map[string][]string

// parseCommandLine reads --name=value and --name value flags; anything else is an error. A
// boolean flag must be written --name=true (a bare --enable-pprof would take the next argument
// as its value).
func parseCommandLine(args []string) (commandLine, error) {
	flags := commandLine{}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok || name == "" {
			return nil, fmt.Errorf("argument %q is not a --flag", args[i])
		}
		if n, v, ok := strings.Cut(name, "="); ok {
			flags[n] = append(flags[n], v)
			continue
		}
		if i+1 == len(args) {
			return nil, fmt.Errorf("flag --%s has no value", name)
		}
		flags[name] = append(flags[name], args[i+1])
		i++
	}
	return flags, nil
}

// one returns the value of a flag given exactly once.
func (c commandLine) one(name string) (string, error) {
	if len(c[name]) != 1 {
		return "", fmt.Errorf("flag --%s given %d times, want once", name, len(c[name]))
	}
	return c[name][0], nil
}

func TestRenderIsStrict(t *testing.T) {
	good := "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - name: grpc\n    port: 7070\n"
	tests := []struct {
		name    string
		doc     string
		wantErr bool
	}{
		{name: "valid", doc: good},
		{name: "unknown field", doc: strings.Replace(good, "port: 7070", "port: 7070\n    targetPortt: 1", 1), wantErr: true},
		{name: "misspelt case", doc: strings.Replace(good, "port: 7070", "Port: 7070", 1), wantErr: true},
		{name: "duplicate field", doc: strings.Replace(good, "port: 7070", "port: 7070\n    port: 7071", 1), wantErr: true},
		{name: "unknown kind", doc: strings.Replace(good, "kind: Service", "kind: Servise", 1), wantErr: true},
		{name: "wrong type", doc: strings.Replace(good, "port: 7070", "port: grpc", 1), wantErr: true},
	}
	decoder, err := newStrictDecoder()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decoder.Decode([]byte(tt.doc), nil, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Decode error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestParseCommandLine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    commandLine
		wantErr bool
	}{
		{name: "equals and space forms", args: []string{"--data-dir=/d", "--listen", "0.0.0.0:7070"},
			want: commandLine{"data-dir": {"/d"}, "listen": {"0.0.0.0:7070"}}},
		{name: "repeated", args: []string{"--override=a=1", "--override", "b=2"},
			want: commandLine{"override": {"a=1", "b=2"}}},
		{name: "positional", args: []string{"serve"}, wantErr: true},
		{name: "missing value", args: []string{"--listen"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCommandLine(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// labelSelector converts s; a missing or empty selector is an error, since it would select
// everything.
func labelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0) {
		return nil, errors.New("empty label selector")
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("label selector: %w", err)
	}
	return sel, nil
}
