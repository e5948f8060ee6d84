package main

import (
	"os"

	"swerl/pipelines/beamrun"
	"swerl/sinks/weightsync"
)

// The environment switches swerl honours, read here so that the library
// packages take them as configuration. Secrets are the exception: an
// engine's API key ($SWERL_API_KEY, else $OPENAI_API_KEY) and a Kafka SASL
// password are read by the process that sends the requests, by a variable
// name its configuration carries (internal/engineapi.KeyEnv,
// kafkaio.SASLConfig.PasswordEnv), so that they never travel in a job
// graph.
const (
	// openAIModelEnv is the model an http(s) policy spec without a model
	// parameter asks for ("default" when neither says).
	openAIModelEnv = "SWERL_OPENAI_MODEL"
	// cpuProfileEnv names a file to write a CPU profile of the command to.
	cpuProfileEnv = "SWERL_CPUPROFILE"
)

// applyEnv hands the process-wide switches of the environment to the
// packages that honour them; runMain calls it before every command.
func applyEnv() {
	beamrun.SetAllInterfaces(os.Getenv(beamrun.AllInterfacesEnv) == "1")
}

// policyFromEnv returns an http(s) policy spec with its model set from
// $SWERL_OPENAI_MODEL when the spec names none; other specs, and every
// spec when the variable is unset, are returned as they are.
func policyFromEnv(spec string) string {
	if m := os.Getenv(openAIModelEnv); m != "" {
		return weightsync.WithDefault(spec, "model", m)
	}
	return spec
}
