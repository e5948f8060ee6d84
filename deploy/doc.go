// Package deploy holds swerl's deployment files, not Go code: the Docker
// Compose stack (Kafka in KRaft mode, Flink with the Beam Flink job server,
// Prometheus, Grafana), the Dataflow launch scripts, the Kubernetes manifests
// (Strimzi Kafka, the Flink Kubernetes operator, the learner as a GPU
// Deployment), Prometheus rules and the Grafana dashboard. README.md in this
// folder says how to use them.
//
// # Behavior
//
// The package's tests are the contract of these files. `go test ./deploy`
// needs no external tool and fails when
//   - a YAML or JSON file does not parse, or a YAML mapping repeats a key;
//   - a Kubernetes manifest misses a required field or refers to something
//     that is not there: a selector that matches no pod template, a Service
//     port name no container declares, a volume, claim or Secret that is not
//     defined (Secrets that Strimzi generates count as defined), a Strimzi
//     resource naming an unknown cluster;
//   - a compose service depends on, mounts or shares the network of something
//     that does not exist, or builds a Dockerfile stage that is not there;
//   - a Beam flag given to `swerl mine` or `swerl train` is not declared by
//     the Beam Go SDK source of the version in go.mod, or an image tag names
//     another Beam version;
//   - the dashboard or the rules use a metric, or group by a label, that the
//     metric table in README.md does not list, or a listed metric is on no
//     dashboard panel.
//
// scripts/validate-deploy.sh runs the real external validators on top of
// this (yamllint, docker-compose, promtool, shellcheck, Kubernetes JSON
// schemas, a Dockerfile linter).
package deploy
