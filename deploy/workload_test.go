package deploy

import (
	"errors"
	"fmt"
	"math"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/magiconair/properties"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What the deployment promises; the checks below hold the manifests to it.
const (
	dataDir          = "/var/lib/coordinatord"
	grpcPort         = 7070
	metricsPort      = 7071
	raftPort         = 7072
	propertiesKey    = "coordinatord.properties"
	drainKey         = "shutdown.drain.timeout.ms"
	defaultDrain     = 20 * time.Second // built-in default of shutdown.drain.timeout.ms
	drainMargin      = 10 * time.Second // left after the drain to flush and close the state logs
	minStartupBudget = 30 * time.Minute // replay of large state logs
	envPrefix        = "COORDINATORD_"
)

// check is one property of a rendered deployment.
type check struct {
	name string
	fn   func(*manifests) error
}

// workloadChecks hold for the base and for every overlay.
func workloadChecks() []check {
	return []check{
		{"a three-node cluster", checkCluster},
		{"data dir on the volume claim", checkDataDir},
		{"listen ports are container ports", checkListenPorts},
		{"advertised address is the pod's DNS name", checkAdvertisedListen},
		{"config file from the ConfigMap", checkConfigFile},
		{"probes", checkProbes},
		{"services", checkServices},
		{"security context", checkSecurity},
		{"resources", checkResources},
		{"termination grace above drain", checkTerminationGrace},
		{"disruption budget", checkDisruptionBudget},
	}
}

func statefulSetContainer(m *manifests) (*appsv1.StatefulSet, *corev1.Container, commandLine, error) {
	sts, err := m.statefulSet()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := coordinatordContainer(sts)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(c.Command) == 0 {
		return nil, nil, nil, errors.New("container command is not set: the flags checked here would not be the ones run")
	}
	flags, err := parseCommandLine(append(slices.Clone(c.Command[1:]), c.Args...))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("container command line: %w", err)
	}
	return sts, c, flags, nil
}

// checkCluster: a three-node cluster whose --initial-cluster names the StatefulSet's pods by
// their stable names in the headless Service, each pod's node id its ordinal plus one, the
// replication port a named container port that the headless Service exposes, pods started
// together (a node is ready once a majority runs) and never two on one machine.
func checkCluster(m *manifests) error {
	sts, c, flags, err := statefulSetContainer(m)
	if err != nil {
		return err
	}
	initial, err := flags.one("initial-cluster")
	if err != nil {
		return err
	}
	members := strings.Split(initial, ",")
	if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != len(members) || len(members) != 3 {
		return fmt.Errorf("replicas = %v and --initial-cluster names %d members, want 3 and 3", sts.Spec.Replicas, len(members))
	}
	for i, member := range members {
		want := fmt.Sprintf("%d=%s-%d.%s.$(POD_NAMESPACE).svc:%d", i+1, sts.Name, i, sts.Spec.ServiceName, raftPort)
		if member != want {
			return fmt.Errorf("--initial-cluster member %q, want %q", member, want)
		}
	}
	if err := checkJoin(sts, flags); err != nil {
		return err
	}
	if got, err := flags.one("node-id-from-pod-name"); err != nil || got != "$(POD_NAME)" {
		return fmt.Errorf("--node-id-from-pod-name=%q (%v), want $(POD_NAME)", got, err)
	}
	if _, ok := flags["node-id"]; ok {
		return errors.New("--node-id is set: the node id must come from the pod's ordinal")
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		return fmt.Errorf("podManagementPolicy %q, want Parallel: a node is ready only once a majority runs", sts.Spec.PodManagementPolicy)
	}
	if err := checkRaftPort(m, sts, c, flags); err != nil {
		return err
	}
	return checkAntiAffinity(sts)
}

// checkJoin: a pod whose volume is new (lost, or a pod beyond the founders) asks the founding pods
// to replace or add its node (--join, their gRPC addresses by stable name), and gives its own
// stable name as its replication address (--raft-advertise), which a node --initial-cluster does
// not name needs.
func checkJoin(sts *appsv1.StatefulSet, flags commandLine) error {
	join, err := flags.one("join")
	if err != nil {
		return fmt.Errorf("%w: a pod whose volume is lost could not come back", err)
	}
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("%s-%d.%s.$(POD_NAMESPACE).svc:%d", sts.Name, i, sts.Spec.ServiceName, grpcPort))
	}
	if join != strings.Join(want, ",") {
		return fmt.Errorf("--join=%s, want the founding pods' gRPC addresses %s", join, strings.Join(want, ","))
	}
	advertise, err := flags.one("raft-advertise")
	if err != nil {
		return err
	}
	if w := fmt.Sprintf("$(POD_NAME).%s.$(POD_NAMESPACE).svc:%d", sts.Spec.ServiceName, raftPort); advertise != w {
		return fmt.Errorf("--raft-advertise=%s, want the pod's stable name %s", advertise, w)
	}
	return nil
}

// checkRaftPort: --raft-listen binds all interfaces on the container port named raft, which the
// headless Service exposes to the other pods, resolvable before they are ready.
func checkRaftPort(m *manifests, sts *appsv1.StatefulSet, c *corev1.Container, flags commandLine) error {
	addr, err := flags.one("raft-listen")
	if err != nil {
		return err
	}
	if addr != fmt.Sprintf("0.0.0.0:%d", raftPort) {
		return fmt.Errorf("--raft-listen=%s, want 0.0.0.0:%d", addr, raftPort)
	}
	if p, ok := containerPortByName(c, "raft"); !ok || p.ContainerPort != raftPort {
		return fmt.Errorf("no container port raft = %d", raftPort)
	}
	headless, err := m.service(sts.Spec.ServiceName)
	if err != nil {
		return err
	}
	if !headless.Spec.PublishNotReadyAddresses {
		return fmt.Errorf("Service %s does not publish addresses of pods not ready: the nodes could not find each other to catch up", headless.Name)
	}
	if !slices.ContainsFunc(headless.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "raft" && p.Port == raftPort }) {
		return fmt.Errorf("Service %s does not expose the raft port %d", headless.Name, raftPort)
	}
	return nil
}

// checkAntiAffinity: two pods never share a machine (required), and spread over zones
// (preferred).
func checkAntiAffinity(sts *appsv1.StatefulSet) error {
	aff := sts.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil {
		return errors.New("no pod anti-affinity: two nodes on one machine would be lost together")
	}
	pods := labels.Set(sts.Spec.Template.Labels)
	selects := func(t corev1.PodAffinityTerm) bool {
		sel, err := labelSelector(t.LabelSelector)
		return err == nil && !sel.Empty() && sel.Matches(pods)
	}
	if !slices.ContainsFunc(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, func(t corev1.PodAffinityTerm) bool {
		return t.TopologyKey == "kubernetes.io/hostname" && selects(t)
	}) {
		return errors.New("no required pod anti-affinity on kubernetes.io/hostname selecting the pods")
	}
	if !slices.ContainsFunc(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, func(t corev1.WeightedPodAffinityTerm) bool {
		return t.PodAffinityTerm.TopologyKey == "topology.kubernetes.io/zone" && selects(t.PodAffinityTerm)
	}) {
		return errors.New("no preferred pod anti-affinity on topology.kubernetes.io/zone selecting the pods")
	}
	return nil
}

// checkDataDir: --data-dir is the mount path of a volume claim template.
func checkDataDir(m *manifests) error {
	sts, c, flags, err := statefulSetContainer(m)
	if err != nil {
		return err
	}
	dir, err := flags.one("data-dir")
	if err != nil {
		return err
	}
	if dir != dataDir {
		return fmt.Errorf("--data-dir = %q, want %q (the image's volume)", dir, dataDir)
	}
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Clean(dir) {
			continue
		}
		if vm.ReadOnly || vm.SubPath != "" {
			return fmt.Errorf("data volume %q is mounted read-only or with a subPath", vm.Name)
		}
		for _, pvc := range sts.Spec.VolumeClaimTemplates {
			if pvc.Name != vm.Name {
				continue
			}
			if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteOnce) {
				return fmt.Errorf("volume claim %q access modes %v lack ReadWriteOnce", pvc.Name, pvc.Spec.AccessModes)
			}
			if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.IsZero() {
				return fmt.Errorf("volume claim %q requests no storage", pvc.Name)
			}
			return nil
		}
		return fmt.Errorf("--data-dir %s is mounted from %q, which is not a volume claim template", dir, vm.Name)
	}
	return fmt.Errorf("--data-dir %s is not a volume mount", dir)
}

// checkListenPorts: --listen and --metrics-listen bind all interfaces on the named container ports.
func checkListenPorts(m *manifests) error {
	_, c, flags, err := statefulSetContainer(m)
	if err != nil {
		return err
	}
	for _, l := range []struct {
		flag, portName string
		port           int32
	}{{"listen", "grpc", grpcPort}, {"metrics-listen", "metrics", metricsPort}} {
		addr, err := flags.one(l.flag)
		if err != nil {
			return err
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("--%s=%s: %w", l.flag, addr, err)
		}
		if host != "0.0.0.0" && host != "" {
			return fmt.Errorf("--%s=%s: kubelet probes and Services need all interfaces", l.flag, addr)
		}
		cp, ok := containerPortByName(c, l.portName)
		if !ok {
			return fmt.Errorf("no container port named %q", l.portName)
		}
		if strconv.Itoa(int(cp.ContainerPort)) != port || cp.ContainerPort != l.port {
			return fmt.Errorf("--%s=%s but container port %q is %d (want %d)", l.flag, addr, l.portName, cp.ContainerPort, l.port)
		}
	}
	return nil
}

// checkAdvertisedListen: FindCoordinator must answer with a name clients can resolve, the
// pod's name in the StatefulSet's headless Service, on the gRPC port.
func checkAdvertisedListen(m *manifests) error {
	sts, c, flags, err := statefulSetContainer(m)
	if err != nil {
		return err
	}
	got, err := flags.one("advertised-listen")
	if err != nil {
		return err
	}
	want := fmt.Sprintf("$(POD_NAME).%s.$(POD_NAMESPACE).svc:%d", sts.Spec.ServiceName, grpcPort)
	if got != want {
		return fmt.Errorf("--advertised-listen=%s, want %s", got, want)
	}
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"} {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != field {
			return fmt.Errorf("env %s must come from the field %s", name, field)
		}
	}
	return nil
}

func containerPortByName(c *corev1.Container, name string) (corev1.ContainerPort, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

// resolvePort returns the container port number that p (a number or a port name) refers to.
func resolvePort(c *corev1.Container, p intstr.IntOrString) (int32, error) {
	if p.Type == intstr.String {
		cp, ok := containerPortByName(c, p.StrVal)
		if !ok {
			return 0, fmt.Errorf("port name %q is not a container port", p.StrVal)
		}
		return cp.ContainerPort, nil
	}
	for _, cp := range c.Ports {
		if cp.ContainerPort == p.IntVal {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("port %d is not a container port", p.IntVal)
}

// checkConfigFile: --config names the properties file of a rendered ConfigMap, mounted read-only.
func checkConfigFile(m *manifests) error {
	_, err := configProperties(m)
	return err
}

// configProperties returns the properties file that --config names, read from its ConfigMap.
func configProperties(m *manifests) (*properties.Properties, error) {
	sts, c, flags, err := statefulSetContainer(m)
	if err != nil {
		return nil, err
	}
	file, err := flags.one("config")
	if err != nil {
		return nil, err
	}
	dir, key := path.Split(file)
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Clean(dir) {
			continue
		}
		if !vm.ReadOnly {
			return nil, fmt.Errorf("config volume %q is writable", vm.Name)
		}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			cm, err := m.configMap(v.ConfigMap.Name)
			if err != nil {
				return nil, err
			}
			text, ok := cm.Data[key]
			if !ok {
				return nil, fmt.Errorf("ConfigMap %s has no key %q for --config=%s", cm.Name, key, file)
			}
			p, err := properties.LoadString(text)
			if err != nil {
				return nil, fmt.Errorf("ConfigMap %s key %s: %w", cm.Name, key, err)
			}
			return p, nil
		}
		return nil, fmt.Errorf("--config=%s: volume %q is not a ConfigMap volume", file, vm.Name)
	}
	return nil, fmt.Errorf("--config=%s is not under a volume mount", file)
}

// drainTimeout resolves shutdown.drain.timeout.ms as the server does: --override, then the
// COORDINATORD_ environment variable, then the properties file, then the built-in default.
func drainTimeout(m *manifests) (time.Duration, error) {
	_, c, flags, err := statefulSetContainer(m)
	if err != nil {
		return 0, err
	}
	p, err := configProperties(m)
	if err != nil {
		return 0, err
	}
	value, source := "", "default"
	if v, ok := p.Get(drainKey); ok {
		value, source = v, "properties file"
	}
	envName := envPrefix + strings.ToUpper(strings.ReplaceAll(drainKey, ".", "_"))
	for _, e := range c.Env {
		if e.Name == envName {
			if e.ValueFrom != nil {
				return 0, fmt.Errorf("%s comes from %v: its value cannot be checked", envName, e.ValueFrom)
			}
			value, source = e.Value, "environment"
		}
	}
	for _, o := range flags["override"] {
		if k, v, ok := strings.Cut(o, "="); ok && strings.TrimSpace(k) == drainKey {
			value, source = v, "--override"
		}
	}
	if source == "default" {
		return defaultDrain, nil
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("%s=%q (from the %s) is not a non-negative whole number", drainKey, value, source)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// checkTerminationGrace: the kubelet waits long enough for the drain and the close after it.
func checkTerminationGrace(m *manifests) error {
	sts, err := m.statefulSet()
	if err != nil {
		return err
	}
	drain, err := drainTimeout(m)
	if err != nil {
		return err
	}
	g := sts.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil {
		return errors.New("terminationGracePeriodSeconds is not set (the default 30 s is not derived from the drain)")
	}
	if grace := time.Duration(*g) * time.Second; grace < drain+drainMargin {
		return fmt.Errorf("terminationGracePeriodSeconds %v < %s %v + %v to close the logs", grace, drainKey, drain, drainMargin)
	}
	return nil
}

// readyPath is the readiness endpoint the startup and readiness probes use.
const readyPath = "/readyz?exclude=failed"

// checkProbes: startup waits long enough for a replay, startup and readiness are /readyz with
// failed partitions excluded, liveness is /healthz, all on the metrics port; every probe targets a
// real container port.
func checkProbes(m *manifests) error {
	_, c, _, err := statefulSetContainer(m)
	if err != nil {
		return err
	}
	sp, rp, lp := c.StartupProbe, c.ReadinessProbe, c.LivenessProbe
	if sp == nil || rp == nil || lp == nil {
		return errors.New("startup, readiness and liveness probes must all be set")
	}
	for name, p := range map[string]*corev1.Probe{"startup": sp, "readiness": rp, "liveness": lp} {
		if err := checkProbeTarget(c, p); err != nil {
			return fmt.Errorf("%s probe: %w", name, err)
		}
	}
	if budget := time.Duration(sp.FailureThreshold*sp.PeriodSeconds) * time.Second; budget < minStartupBudget {
		return fmt.Errorf("startup probe allows %v (failureThreshold × periodSeconds), want at least %v for a long replay", budget, minStartupBudget)
	}
	// The startup probe must not require every partition to be healthy: a partition with a
	// damaged log stays failed while the others serve, and plain /readyz would restart the pod
	// forever. Both go to the metrics port: clients filling grpc.max.connections on the gRPC port
	// must not lock the kubelet out.
	for name, p := range map[string]*corev1.Probe{"startup": sp, "readiness": rp} {
		if p.HTTPGet == nil || p.HTTPGet.Path != readyPath {
			return fmt.Errorf("%s probe must be GET %s (200 once every partition finished loading, failed ones aside)", name, readyPath)
		}
		if port, _ := resolvePort(c, p.HTTPGet.Port); port != metricsPort {
			return fmt.Errorf("%s probe targets port %d, want the metrics port %d", name, port, metricsPort)
		}
	}
	if lp.HTTPGet == nil || lp.HTTPGet.Path != "/healthz" {
		return errors.New("liveness probe must be GET /healthz")
	}
	if port, _ := resolvePort(c, lp.HTTPGet.Port); port != metricsPort {
		return fmt.Errorf("liveness probe targets port %d, want the metrics port %d", port, metricsPort)
	}
	return nil
}

func checkProbeTarget(c *corev1.Container, p *corev1.Probe) error {
	switch {
	case p.GRPC != nil:
		port, err := resolvePort(c, intstr.FromInt32(p.GRPC.Port))
		if err == nil && port != grpcPort {
			err = fmt.Errorf("gRPC probe on port %d, which is not the gRPC port %d", port, grpcPort)
		}
		return err
	case p.HTTPGet != nil:
		port, err := resolvePort(c, p.HTTPGet.Port)
		if err == nil && port != metricsPort {
			err = fmt.Errorf("HTTP probe on port %d, which is not the metrics port %d", port, metricsPort)
		}
		return err
	default:
		return errors.New("neither a gRPC nor an HTTP probe")
	}
}

// checkServices: the StatefulSet's governing Service is headless; every Service selects the pods
// and targets real container ports; the client Service has the named ports of the API.
func checkServices(m *manifests) error {
	sts, c, _, err := statefulSetContainer(m)
	if err != nil {
		return err
	}
	pods := labels.Set(sts.Spec.Template.Labels)
	sel, err := labelSelector(sts.Spec.Selector)
	if err != nil {
		return err
	}
	if !sel.Matches(pods) {
		return fmt.Errorf("StatefulSet selector %v does not match its pod labels %v", sel, pods)
	}
	headless, err := m.service(sts.Spec.ServiceName)
	if err != nil {
		return fmt.Errorf("serviceName: %w", err)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		return fmt.Errorf("Service %s governs the StatefulSet but is not headless", headless.Name)
	}
	clients := 0
	for _, s := range m.services {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(pods) {
			return fmt.Errorf("Service %s selector %v does not select the pods %v", s.Name, s.Spec.Selector, pods)
		}
		names := map[string]int32{}
		for _, p := range s.Spec.Ports {
			target, err := resolvePort(c, p.TargetPort)
			if err != nil {
				return fmt.Errorf("Service %s port %s: %w", s.Name, p.Name, err)
			}
			if target != p.Port {
				return fmt.Errorf("Service %s port %s is %d but targets %d", s.Name, p.Name, p.Port, target)
			}
			names[p.Name] = p.Port
		}
		if s.Spec.ClusterIP != corev1.ClusterIPNone {
			clients++
			if names["grpc"] != grpcPort || names["metrics"] != metricsPort {
				return fmt.Errorf("client Service %s ports %v, want grpc %d and metrics %d", s.Name, names, grpcPort, metricsPort)
			}
		}
	}
	if clients != 1 {
		return fmt.Errorf("%d client Services, want 1", clients)
	}
	return nil
}

// checkSecurity: non-root, read-only root filesystem, no capabilities, RuntimeDefault seccomp.
func checkSecurity(m *manifests) error {
	sts, c, _, err := statefulSetContainer(m)
	if err != nil {
		return err
	}
	pod, sc := sts.Spec.Template.Spec.SecurityContext, c.SecurityContext
	if pod == nil || sc == nil {
		return errors.New("pod and container securityContext must be set")
	}
	if !isTrue(pod.RunAsNonRoot) && !isTrue(sc.RunAsNonRoot) {
		return errors.New("runAsNonRoot is not set")
	}
	for _, uid := range []*int64{pod.RunAsUser, sc.RunAsUser} {
		if uid != nil && *uid == 0 {
			return errors.New("runAsUser is 0")
		}
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		return errors.New("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		return errors.New("allowPrivilegeEscalation is not false")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
		return errors.New("capabilities must drop ALL and add none")
	}
	seccomp := pod.SeccompProfile
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		return errors.New("seccompProfile is not RuntimeDefault")
	}
	if pod.FSGroup == nil {
		return errors.New("fsGroup is not set: a fresh volume would not be writable by the non-root user")
	}
	return nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// checkResources: requests for scheduling, a memory limit equal to the memory request (a pod
// above its request is among the first evicted when its node runs short of memory, and the Go
// heap grows towards GOMEMLIMIT), and GOMEMLIMIT set at most 90 % of the limit, so that the
// runtime collects before the kernel kills.
func checkResources(m *manifests) error {
	_, c, _, err := statefulSetContainer(m)
	if err != nil {
		return err
	}
	r := c.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := r.Requests[name]; !ok || q.IsZero() {
			return fmt.Errorf("no %s request", name)
		}
	}
	limit, ok := r.Limits[corev1.ResourceMemory]
	if !ok {
		return errors.New("no memory limit")
	}
	if limit.Cmp(r.Requests[corev1.ResourceMemory]) != 0 {
		return fmt.Errorf("memory limit %v differs from its request %v", limit.String(), r.Requests.Memory().String())
	}
	var goMemLimit string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			goMemLimit = e.Value
		}
	}
	soft, err := parseGoMemLimit(goMemLimit)
	if err != nil {
		return err
	}
	if soft > limit.Value()/10*9 {
		return fmt.Errorf("GOMEMLIMIT %s leaves less than 10%% of the memory limit %v", goMemLimit, limit.String())
	}
	return nil
}

// parseGoMemLimit parses a GOMEMLIMIT value as the Go runtime does: a byte count with an optional
// unit B, KiB, MiB, GiB or TiB.
func parseGoMemLimit(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}}
	digits, mult := v, int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			digits, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("GOMEMLIMIT %q: want a byte count such as 900MiB (the runtime otherwise ignores the memory limit)", v)
	}
	return n * mult, nil
}

// checkDisruptionBudget: one budget that selects the pods.
func checkDisruptionBudget(m *manifests) error {
	sts, err := m.statefulSet()
	if err != nil {
		return err
	}
	if len(m.budgets) != 1 {
		return fmt.Errorf("%d PodDisruptionBudgets, want 1", len(m.budgets))
	}
	pdb := m.budgets[0]
	sel, err := labelSelector(pdb.Spec.Selector)
	if err != nil {
		return fmt.Errorf("PodDisruptionBudget %s: %w", pdb.Name, err)
	}
	if !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
		return fmt.Errorf("PodDisruptionBudget %s selector does not match the pods", pdb.Name)
	}
	if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
		return fmt.Errorf("PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", pdb.Name)
	}
	return nil
}
