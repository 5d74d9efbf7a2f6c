package deploy

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/coordinatord/coordinatord/deploy/internal/promspec"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const (
	baseDir    = "base"
	overlayDir = "overlays/example"
)

func TestManifests(t *testing.T) {
	tests := []struct {
		dir    string
		checks []check
	}{
		{dir: baseDir, checks: workloadChecks()},
		{dir: overlayDir, checks: append(append(workloadChecks(), monitoringChecks()...),
			check{"namespace", checkNamespace})},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			m, err := render(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.checks {
				t.Run(c.name, func(t *testing.T) {
					if err := c.fn(m); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}

// checkNamespace: every object lives in the overlay's Namespace, which the overlay creates.
func checkNamespace(m *manifests) error {
	if len(m.namespaces) != 1 {
		return fmt.Errorf("%d Namespaces, want 1", len(m.namespaces))
	}
	ns := m.namespaces[0].Name
	for _, obj := range m.objects {
		if _, isNamespace := obj.(*corev1.Namespace); isNamespace {
			continue
		}
		if n := obj.GetNamespace(); n != ns {
			return fmt.Errorf("%T %s in namespace %q, want %q", obj, obj.GetName(), n, ns)
		}
	}
	return nil
}

// TestChecksCatchMistakes breaks the rendered overlay one way at a time and expects the check
// that guards against it to fail.
func TestChecksCatchMistakes(t *testing.T) {
	tests := []struct {
		name   string
		check  func(*manifests) error
		mutate func(t *testing.T, m *manifests)
	}{
		{"four replicas for three members", checkCluster, func(t *testing.T, m *manifests) {
			m.statefulSets[0].Spec.Replicas = ptr.To[int32](4)
		}},
		{"a member not named by its pod", checkCluster, func(t *testing.T, m *manifests) {
			setArg(t, m, "--initial-cluster=", "--initial-cluster=1=coordinatord-0.coordinatord-headless.$(POD_NAMESPACE).svc:7072,"+
				"2=coordinatord-2.coordinatord-headless.$(POD_NAMESPACE).svc:7072,3=coordinatord-1.coordinatord-headless.$(POD_NAMESPACE).svc:7072")
		}},
		{"no --join", checkCluster, func(t *testing.T, m *manifests) {
			c := container(t, m)
			c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--join=") })
		}},
		{"a replication address not the pod's", checkCluster, func(t *testing.T, m *manifests) {
			setArg(t, m, "--raft-advertise=", "--raft-advertise=0.0.0.0:7072")
		}},
		{"a fixed node id", checkCluster, func(t *testing.T, m *manifests) {
			c := container(t, m)
			c.Args = append(c.Args, "--node-id=1")
		}},
		{"pods started in order", checkCluster, func(t *testing.T, m *manifests) {
			m.statefulSets[0].Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
		}},
		{"raft on loopback", checkCluster, func(t *testing.T, m *manifests) {
			setArg(t, m, "--raft-listen=", "--raft-listen=127.0.0.1:7072")
		}},
		{"raft port not in the headless Service", checkCluster, func(t *testing.T, m *manifests) {
			for _, s := range m.services {
				if s.Spec.ClusterIP == corev1.ClusterIPNone {
					s.Spec.Ports = s.Spec.Ports[:1]
				}
			}
		}},
		{"two pods may share a machine", checkCluster, func(t *testing.T, m *manifests) {
			m.statefulSets[0].Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
		}},
		{"data dir not on the claim", checkDataDir, func(t *testing.T, m *manifests) {
			container(t, m).VolumeMounts[0].MountPath = "/data"
		}},
		{"data dir flag differs", checkDataDir, func(t *testing.T, m *manifests) {
			setArg(t, m, "--data-dir=", "--data-dir=/var/lib/other")
		}},
		{"listen port not a container port", checkListenPorts, func(t *testing.T, m *manifests) {
			setArg(t, m, "--listen=", "--listen=0.0.0.0:9000")
		}},
		{"metrics on loopback", checkListenPorts, func(t *testing.T, m *manifests) {
			setArg(t, m, "--metrics-listen=", "--metrics-listen=127.0.0.1:7071")
		}},
		{"advertised name not in the headless Service", checkAdvertisedListen, func(t *testing.T, m *manifests) {
			m.statefulSets[0].Spec.ServiceName = "other"
		}},
		{"config file key missing", checkConfigFile, func(t *testing.T, m *manifests) {
			setArg(t, m, "--config=", "--config=/etc/coordinatord/other.properties")
		}},
		{"readiness probe on the gRPC port", checkProbes, func(t *testing.T, m *manifests) {
			container(t, m).ReadinessProbe.HTTPGet.Port = intstr.FromInt32(7070)
		}},
		{"startup probe on plain /readyz (a damaged log would restart the pod forever)", checkProbes, func(t *testing.T, m *manifests) {
			container(t, m).StartupProbe.HTTPGet.Path = "/readyz"
		}},
		{"readiness probe as a gRPC probe (clients filling the connection limit lock it out)", checkProbes, func(t *testing.T, m *manifests) {
			p := container(t, m).ReadinessProbe
			p.HTTPGet, p.GRPC = nil, &corev1.GRPCAction{Port: 7070, Service: new(string)}
		}},
		{"liveness probe on an unknown port name", checkProbes, func(t *testing.T, m *manifests) {
			container(t, m).LivenessProbe.HTTPGet.Port = intstr.FromString("http")
		}},
		{"startup budget too short", checkProbes, func(t *testing.T, m *manifests) {
			container(t, m).StartupProbe.FailureThreshold = 30
		}},
		{"readiness probe missing", checkProbes, func(t *testing.T, m *manifests) {
			container(t, m).ReadinessProbe = nil
		}},
		{"service targets an unknown port", checkServices, func(t *testing.T, m *manifests) {
			m.services[0].Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
		}},
		{"governing service not headless", checkServices, func(t *testing.T, m *manifests) {
			for _, s := range m.services {
				s.Spec.ClusterIP = ""
			}
		}},
		{"writable root filesystem", checkSecurity, func(t *testing.T, m *manifests) {
			container(t, m).SecurityContext.ReadOnlyRootFilesystem = ptr.To(false)
		}},
		{"capability added", checkSecurity, func(t *testing.T, m *manifests) {
			container(t, m).SecurityContext.Capabilities.Add = append(container(t, m).SecurityContext.Capabilities.Add, "NET_ADMIN")
		}},
		{"no memory limit", checkResources, func(t *testing.T, m *manifests) {
			delete(container(t, m).Resources.Limits, "memory")
		}},
		{"memory limit below request", checkResources, func(t *testing.T, m *manifests) {
			container(t, m).Resources.Limits["memory"] = resource.MustParse("1Mi")
		}},
		{"memory limit above request", checkResources, func(t *testing.T, m *manifests) {
			container(t, m).Resources.Requests["memory"] = resource.MustParse("256Mi")
		}},
		{"GOMEMLIMIT missing", checkResources, func(t *testing.T, m *manifests) {
			c := container(t, m)
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
		}},
		{"GOMEMLIMIT past what a byte count holds", checkResources, func(t *testing.T, m *manifests) {
			c := container(t, m)
			for i := range c.Env {
				if c.Env[i].Name == "GOMEMLIMIT" {
					c.Env[i].Value = "8388608TiB"
				}
			}
		}},
		{"GOMEMLIMIT at the memory limit", checkResources, func(t *testing.T, m *manifests) {
			c := container(t, m)
			for i := range c.Env {
				if c.Env[i].Name == "GOMEMLIMIT" {
					c.Env[i].Value = fmt.Sprintf("%dB", c.Resources.Limits.Memory().Value())
				}
			}
		}},
		{"grace shorter than drain", checkTerminationGrace, func(t *testing.T, m *manifests) {
			m.statefulSets[0].Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](25)
		}},
		{"drain raised through the environment", checkTerminationGrace, func(t *testing.T, m *manifests) {
			c := container(t, m)
			c.Env = append(c.Env, corev1.EnvVar{Name: "COORDINATORD_SHUTDOWN_DRAIN_TIMEOUT_MS", Value: "60000"})
		}},
		{"drain raised with --override", checkTerminationGrace, func(t *testing.T, m *manifests) {
			c := container(t, m)
			c.Args = append(c.Args, "--override=shutdown.drain.timeout.ms=40000")
		}},
		{"budget selects other pods", checkDisruptionBudget, func(t *testing.T, m *manifests) {
			m.budgets[0].Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}},
		{"ServiceMonitor port name unknown", checkServiceMonitor, func(t *testing.T, m *manifests) {
			m.serviceMonitors[0].Spec.Endpoints[0].Port = "http-metrics"
		}},
		{"ServiceMonitor selects both Services", checkServiceMonitor, func(t *testing.T, m *manifests) {
			delete(m.serviceMonitors[0].Spec.Selector.MatchLabels, "coordinatord/endpoint")
		}},
		{"ServiceMonitor job label differs", checkServiceMonitor, func(t *testing.T, m *manifests) {
			m.serviceMonitors[0].Spec.JobLabel = "app.kubernetes.io/part-of-x"
		}},
		{"PrometheusRule edited by hand", checkPrometheusRule, func(t *testing.T, m *manifests) {
			m.rules[0].Spec.Groups[0].Rules[0].Labels["severity"] = "page"
		}},
		{"dashboard ConfigMap stale", checkDashboardConfigMap, func(t *testing.T, m *manifests) {
			for _, cm := range m.configMaps {
				for k := range cm.Data {
					if cm.Labels["grafana_dashboard"] == "1" {
						cm.Data[k] += " "
					}
				}
			}
		}},
		{"object outside the namespace", checkNamespace, func(t *testing.T, m *manifests) {
			m.services[0].Namespace = "default"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := render(overlayDir)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.check(m); err != nil {
				t.Fatalf("check fails before the mutation: %v", err)
			}
			tt.mutate(t, m)
			if err := tt.check(m); err == nil {
				t.Fatal("check passed after the mutation")
			}
		})
	}
}

func container(t *testing.T, m *manifests) *corev1.Container {
	t.Helper()
	sts, err := m.statefulSet()
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinatordContainer(sts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setArg replaces the container argument that starts with prefix.
func setArg(t *testing.T, m *manifests, prefix, arg string) {
	t.Helper()
	c := container(t, m)
	for i, a := range c.Args {
		if strings.HasPrefix(a, prefix) {
			c.Args[i] = arg
			return
		}
	}
	t.Fatalf("no argument %s...", prefix)
}

func TestPrometheusRuleIsGenerated(t *testing.T) {
	want, err := promspec.GeneratePrometheusRule(rulesPath, prometheusRuleName)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(prometheusRulePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `go generate` in deploy/", prometheusRulePath)
	}
}
