package deploy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Kubernetes

type k8sDoc struct {
	file string
	obj  map[string]any
}

func (d k8sDoc) kind() string { return strAt(d.obj, "kind") }
func (d k8sDoc) name() string { return strAt(d.obj, "metadata", "name") }
func (d k8sDoc) String() string {
	return fmt.Sprintf("%s: %s %s", filepath.Base(d.file), d.kind(), d.name())
}

func k8sDocs(t *testing.T) []k8sDoc {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(deployDir(t), "k8s", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no k8s manifests: %v", err)
	}
	sort.Strings(paths)
	var docs []k8sDoc
	for _, p := range paths {
		for _, obj := range loadYAML(t, p) {
			docs = append(docs, k8sDoc{p, obj})
		}
	}
	return docs
}

// podSpec returns the pod spec of a workload, or nil for other kinds.
func podSpec(d k8sDoc) (spec map[string]any, labels map[string]any) {
	switch d.kind() {
	case "Deployment", "Job", "StatefulSet", "DaemonSet":
		return mapAt(d.obj, "spec", "template", "spec"), mapAt(d.obj, "spec", "template", "metadata", "labels")
	}
	return nil, nil
}

func TestKubernetesManifests(t *testing.T) {
	docs := k8sDocs(t)
	byKind := map[string]map[string]k8sDoc{}
	for _, d := range docs {
		if byKind[d.kind()] == nil {
			byKind[d.kind()] = map[string]k8sDoc{}
		}
		if strAt(d.obj, "apiVersion") == "" || d.kind() == "" || d.name() == "" {
			t.Errorf("%s: apiVersion, kind and metadata.name are required", d)
			continue
		}
		if _, dup := byKind[d.kind()][d.name()]; dup {
			t.Errorf("%s: defined twice", d)
		}
		byKind[d.kind()][d.name()] = d
		if d.kind() != "Namespace" && strAt(d.obj, "metadata", "namespace") != "swerl" {
			t.Errorf("%s: metadata.namespace = %q, want swerl", d, strAt(d.obj, "metadata", "namespace"))
		}
	}
	if byKind["Namespace"]["swerl"].obj == nil {
		t.Error("no Namespace swerl")
	}

	// Secrets that exist once the operators ran: Strimzi makes one per
	// KafkaUser and <cluster>-cluster-ca-cert per Kafka.
	secrets := map[string]bool{}
	for name := range byKind["Secret"] {
		secrets[name] = true
	}
	for name := range byKind["KafkaUser"] {
		secrets[name] = true
	}
	for name := range byKind["Kafka"] {
		secrets[name+"-cluster-ca-cert"] = true
	}
	for _, name := range documentedSecrets(t) {
		secrets[name] = true
	}

	checkPod := func(where string, spec map[string]any) {
		vols := map[string]bool{}
		for _, v := range listAt(spec, "volumes") {
			vols[strAt(v, "name")] = true
			if c := strAt(v, "persistentVolumeClaim", "claimName"); c != "" && byKind["PersistentVolumeClaim"][c].obj == nil {
				t.Errorf("%s: volume %s: claim %s is not defined", where, strAt(v, "name"), c)
			}
			if s := strAt(v, "secret", "secretName"); s != "" && !secrets[s] {
				t.Errorf("%s: volume %s: Secret %s is neither defined nor made by Strimzi", where, strAt(v, "name"), s)
			}
		}
		for _, c := range listAt(spec, "containers") {
			cw := where + " container " + strAt(c, "name")
			for _, m := range listAt(c, "volumeMounts") {
				if !vols[strAt(m, "name")] {
					t.Errorf("%s: mounts volume %s that the pod does not define", cw, strAt(m, "name"))
				}
			}
		}
	}

	for _, d := range docs {
		spec, labels := podSpec(d)
		if spec == nil {
			continue
		}
		if d.kind() == "Deployment" {
			for k, v := range mapAt(d.obj, "spec", "selector", "matchLabels") {
				if labels[k] != v {
					t.Errorf("%s: selector %s=%v does not match the pod template's labels", d, k, v)
				}
			}
		}
		containers := listAt(spec, "containers")
		if len(containers) == 0 {
			t.Errorf("%s: no containers", d)
		}
		for _, c := range containers {
			cw := fmt.Sprintf("%s container %s", d, strAt(c, "name"))
			if strAt(c, "image") == "" {
				t.Errorf("%s: no image", cw)
			}
			if strAt(c, "resources", "requests", "memory") == "" || strAt(c, "resources", "limits", "memory") == "" {
				t.Errorf("%s: resources.requests.memory and resources.limits.memory are required", cw)
			}
		}
		checkPod(d.String(), spec)
	}

	// Services select pods and name container ports that exist.
	for _, svc := range byKind["Service"] {
		sel := mapAt(svc.obj, "spec", "selector")
		if len(sel) == 0 {
			t.Errorf("%s: no selector", svc)
			continue
		}
		var ports []string
		matched := false
		for _, d := range docs {
			spec, labels := podSpec(d)
			if spec == nil {
				continue
			}
			ok := true
			for k, v := range sel {
				ok = ok && labels[k] == v
			}
			if !ok {
				continue
			}
			matched = true
			for _, c := range listAt(spec, "containers") {
				for _, p := range listAt(c, "ports") {
					ports = append(ports, strAt(p, "name"))
				}
			}
		}
		if !matched {
			t.Errorf("%s: selector %v matches no pod template", svc, sel)
		}
		for _, p := range listAt(svc.obj, "spec", "ports") {
			tp := strAt(p, "targetPort")
			if _, err := strconv.Atoi(tp); err != nil && tp != "" && !slices.Contains(ports, tp) {
				t.Errorf("%s: targetPort %s is not a container port name of the selected pods (%v)", svc, tp, ports)
			}
		}
	}

	// The learner: one GPU, one replica, never two at once.
	learner := byKind["Deployment"]["swerl-learner"]
	if learner.obj == nil {
		t.Fatal("no Deployment swerl-learner")
	}
	if r := strAt(learner.obj, "spec", "replicas"); r != "1" {
		t.Errorf("%s: replicas %s, want 1 (a second learner forks the weight history)", learner, r)
	}
	if s := strAt(learner.obj, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("%s: strategy %q, want Recreate", learner, s)
	}
	spec, _ := podSpec(learner)
	c := listAt(spec, "containers")[0]
	if args := strList(listAt(c, "args")); len(args) == 0 || args[0] != "learn" {
		t.Errorf("%s: args %v, want swerl learn", learner, args)
	}
	req, lim := strAt(c, "resources", "requests", "nvidia.com/gpu"), strAt(c, "resources", "limits", "nvidia.com/gpu")
	if req == "" || req != lim {
		t.Errorf("%s: nvidia.com/gpu request %q and limit %q must be set and equal", learner, req, lim)
	}
}

func TestStrimziKafka(t *testing.T) {
	docs := k8sDocs(t)
	kafkas := map[string]k8sDoc{}
	brokersPerCluster := map[string]int{}
	var topics []string
	for _, d := range docs {
		if d.kind() == "Kafka" {
			kafkas[d.name()] = d
		}
	}
	if len(kafkas) == 0 {
		t.Fatal("no Strimzi Kafka resource")
	}
	for _, d := range docs {
		if !strings.HasPrefix(strAt(d.obj, "apiVersion"), "kafka.strimzi.io/") || d.kind() == "Kafka" {
			continue
		}
		cluster := strAt(d.obj, "metadata", "labels", "strimzi.io/cluster")
		if _, ok := kafkas[cluster]; !ok {
			t.Errorf("%s: label strimzi.io/cluster=%q names no Kafka resource", d, cluster)
		}
		switch d.kind() {
		case "KafkaNodePool":
			roles := strList(listAt(d.obj, "spec", "roles"))
			if slices.Contains(roles, "broker") {
				n, _ := strconv.Atoi(strAt(d.obj, "spec", "replicas"))
				brokersPerCluster[cluster] += n
			}
			if len(listAt(d.obj, "spec", "storage", "volumes")) == 0 && strAt(d.obj, "spec", "storage", "type") == "jbod" {
				t.Errorf("%s: jbod storage without volumes", d)
			}
		case "KafkaTopic":
			topics = append(topics, d.name())
			n, _ := strconv.Atoi(strAt(d.obj, "spec", "replicas"))
			if p, _ := strconv.Atoi(strAt(d.obj, "spec", "partitions")); p < 1 || n < 1 {
				t.Errorf("%s: partitions and replicas must be at least 1", d)
			}
			if n > brokersPerCluster[cluster] && brokersPerCluster[cluster] > 0 {
				t.Errorf("%s: %d replicas but %d brokers", d, n, brokersPerCluster[cluster])
			}
		}
	}
	for _, want := range []string{"swerl.instances", "swerl.samples", "swerl.weights", "swerl.deadletter"} {
		if !slices.Contains(topics, want) {
			t.Errorf("no KafkaTopic %s (DESIGN.md's topics)", want)
		}
	}
	for name, k := range kafkas {
		ann := mapAt(k.obj, "metadata", "annotations")
		if ann["strimzi.io/kraft"] != "enabled" || ann["strimzi.io/node-pools"] != "enabled" {
			t.Errorf("%s: KRaft needs annotations strimzi.io/kraft and strimzi.io/node-pools = enabled", k)
		}
		if brokersPerCluster[name] == 0 {
			t.Errorf("%s: no KafkaNodePool with the broker role", k)
		}
		minISR, _ := strconv.Atoi(strAt(k.obj, "spec", "kafka", "config", "min.insync.replicas"))
		if minISR >= brokersPerCluster[name] && brokersPerCluster[name] > 1 {
			t.Errorf("%s: min.insync.replicas %d leaves no broker to lose out of %d", k, minISR, brokersPerCluster[name])
		}
	}

	// Secrets that exist once the operators ran (Strimzi makes one per
	// KafkaUser) and the README's kubectl commands made theirs.
	secrets := map[string]bool{}
	for _, d := range docs {
		if d.kind() == "Secret" || d.kind() == "KafkaUser" {
			secrets[d.name()] = true
		}
	}
	for _, name := range documentedSecrets(t) {
		secrets[name] = true
	}

	// Every swerl client points at a listener that exists, with its TLS and
	// SASL settings.
	for _, d := range docs {
		for _, c := range containersOf(d) {
			args := strList(listAt(c, "args"))
			for _, a := range args {
				brokers, ok := strings.CutPrefix(a, "--brokers=")
				if !ok {
					continue
				}
				where := fmt.Sprintf("%s container %s", d, strAt(c, "name"))
				host, port, _ := strings.Cut(brokers, ":")
				cluster, ok := strings.CutSuffix(host, "-kafka-bootstrap")
				k, known := kafkas[cluster]
				if !ok || !known {
					t.Errorf("%s: --brokers host %s is not <Kafka name>-kafka-bootstrap", where, host)
					continue
				}
				var listener map[string]any
				for _, l := range listAt(k.obj, "spec", "kafka", "listeners") {
					if strAt(l, "port") == port {
						listener = l.(map[string]any)
					}
				}
				if listener == nil {
					t.Errorf("%s: no listener of %s on port %s", where, cluster, port)
					continue
				}
				if (strAt(listener, "tls") == "true") != slices.Contains(args, "--kafka-tls") {
					t.Errorf("%s: listener %s tls=%s but --kafka-tls given: %v", where, strAt(listener, "name"), strAt(listener, "tls"), slices.Contains(args, "--kafka-tls"))
				}
				if auth := strAt(listener, "authentication", "type"); auth != "" && !slices.Contains(args, "--sasl-mechanism="+auth) {
					t.Errorf("%s: listener %s wants %s authentication; --sasl-mechanism=%s is missing", where, strAt(listener, "name"), auth, auth)
				}
			}
			// The SASL password and serve's API key come from environment
			// variables: the container must set them from a Secret that
			// exists.
			for _, a := range args {
				_, name, ok := strings.Cut(a, "-env=")
				if !ok || !strings.HasPrefix(a, "--sasl-password-env=") && !strings.HasPrefix(a, "--api-key-env=") {
					continue
				}
				where := fmt.Sprintf("%s container %s", d, strAt(c, "name"))
				found := false
				for _, e := range listAt(c, "env") {
					if strAt(e, "name") != name {
						continue
					}
					found = true
					sec := strAt(e, "valueFrom", "secretKeyRef", "name")
					if sec == "" || strAt(e, "valueFrom", "secretKeyRef", "key") == "" {
						t.Errorf("%s: env %s is not set from a secretKeyRef", where, name)
					} else if !secrets[sec] {
						t.Errorf("%s: env %s: Secret %s is neither defined nor made by Strimzi", where, name, sec)
					}
				}
				if !found {
					t.Errorf("%s: %s but no env entry %s", where, a, name)
				}
			}
		}
	}
}

func containersOf(d k8sDoc) []any {
	spec, _ := podSpec(d)
	return listAt(spec, "containers")
}

func TestFlinkDeployment(t *testing.T) {
	beam := beamVersion(t)
	docs := k8sDocs(t)
	var flink k8sDoc
	for _, d := range docs {
		if d.kind() == "FlinkDeployment" {
			flink = d
		}
	}
	if flink.obj == nil {
		t.Fatal("no FlinkDeployment")
	}
	for _, f := range []string{"image", "flinkVersion", "serviceAccount"} {
		if strAt(flink.obj, "spec", f) == "" {
			t.Errorf("%s: spec.%s is required", flink, f)
		}
	}
	for _, f := range []string{"jobManager", "taskManager"} {
		if strAt(flink.obj, "spec", f, "resource", "memory") == "" || strAt(flink.obj, "spec", f, "resource", "cpu") == "" {
			t.Errorf("%s: spec.%s.resource needs cpu and memory", flink, f)
		}
	}
	// flink:1.19-java11 <-> flinkVersion v1_19 <-> beam_flink1.19_job_server.
	m := regexp.MustCompile(`^flink:(\d+)\.(\d+)`).FindStringSubmatch(strAt(flink.obj, "spec", "image"))
	if m == nil {
		t.Fatalf("%s: image %q is not flink:MAJOR.MINOR...", flink, strAt(flink.obj, "spec", "image"))
	}
	minor := m[1] + "." + m[2]
	if want := "v" + m[1] + "_" + m[2]; strAt(flink.obj, "spec", "flinkVersion") != want {
		t.Errorf("%s: flinkVersion %s, want %s for image %s", flink, strAt(flink.obj, "spec", "flinkVersion"), want, strAt(flink.obj, "spec", "image"))
	}
	wantJobServer := fmt.Sprintf("apache/beam_flink%s_job_server:%s", minor, beam)
	found := false
	for _, d := range docs {
		for _, c := range containersOf(d) {
			if !strings.Contains(strAt(c, "image"), "_job_server") {
				continue
			}
			found = true
			if strAt(c, "image") != wantJobServer {
				t.Errorf("%s: job server image %s, want %s", d, strAt(c, "image"), wantJobServer)
			}
			if args := strList(listAt(c, "args")); !slices.Contains(args, "--flink-master="+flink.name()+"-rest:8081") {
				t.Errorf("%s: job server args %v lack --flink-master=%s-rest:8081", d, args, flink.name())
			}
		}
	}
	if !found {
		t.Error("no Beam Flink job server Deployment")
	}

	// The task managers carry the worker pool the Jobs' --environment_config
	// points at.
	var poolPort string
	for _, c := range listAt(flink.obj, "spec", "taskManager", "podTemplate", "spec", "containers") {
		if slices.Contains(strList(listAt(c, "args")), "--worker_pool") {
			for _, p := range listAt(c, "ports") {
				poolPort = strAt(p, "containerPort")
			}
		}
	}
	if poolPort == "" {
		t.Fatalf("%s: no --worker_pool sidecar with a containerPort in the task manager pod template", flink)
	}
	for _, d := range docs {
		for _, c := range containersOf(d) {
			for _, a := range strList(listAt(c, "args")) {
				if cfg, ok := strings.CutPrefix(a, "--environment_config="); ok && cfg != "localhost:"+poolPort {
					t.Errorf("%s: --environment_config=%s, want localhost:%s (the worker pool sidecar)", d, cfg, poolPort)
				}
			}
		}
	}
}
